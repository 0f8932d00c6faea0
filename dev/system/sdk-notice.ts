/**
 * Imported first by every command of the harness (npm start, npm run sim, bench, bench:reconciler,
 * soak): the AWS SDK's notice that its later versions need Node.js 22 is about the machine running
 * the command, not about the functions (Lambda runs them on Node.js 22), so it is turned off before
 * any SDK client is built. The SDK reads the variable when a client is constructed.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

export {};
