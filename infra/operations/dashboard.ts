/**
 * The CloudWatch dashboard (docs/operations.md, "Dashboard"): the frame every feature's rows go
 * into (each feature's operations.ts makes its own widgets, of its functions' metrics, namespace
 * ContentSync, dimension `service`, its queues and its functions), and the alarm-status widget
 * that shows the state of every alarm.
 *
 * Added to the given stack under its own id, so its logical id, and with it the dashboard's name,
 * does not depend on where this code lives.
 */
import { CfnOutput, Duration, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';

/** One row of widgets, left to right (24 units wide). */
export type DashboardRow = readonly cloudwatch.IWidget[];

/** The state of every alarm given, in that order (`width` units wide, 12 unless given). */
export function alarmStatusWidget(alarms: readonly cloudwatch.IAlarm[], width = 12): cloudwatch.AlarmStatusWidget {
  return new cloudwatch.AlarmStatusWidget({ title: 'Alarms', width, alarms: [...alarms] });
}

/** The dashboard, its rows top to bottom, and its output. */
export function addDashboard(stack: Stack, rows: readonly DashboardRow[]): cloudwatch.Dashboard {
  const dashboard = new cloudwatch.Dashboard(stack, 'Dashboard', { defaultInterval: Duration.hours(6) });
  for (const row of rows) dashboard.addWidgets(...row);
  new CfnOutput(stack, 'DashboardName', { value: dashboard.dashboardName });
  return dashboard;
}
