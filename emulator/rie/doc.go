// Package rie runs a Lambda function's real bootstrap binary under
// aws-lambda-rie (the AWS Lambda Runtime Interface Emulator) and invokes it
// the way the Lambda service would: one invocation at a time per execution
// environment, with a pool of environments for concurrency.
//
// What RIE answers is mapped onto Lambda's Invoke result: a handler error, a
// panic, a runtime that exits (os.Exit, a crash, a failed init) and a timeout
// all come back as a Result whose FunctionError is "Unhandled" and whose
// Payload is the error document {"errorMessage","errorType"}, exactly as the
// Lambda Invoke API reports them. Only failures of the emulator itself (it
// died, the connection broke) are returned as Go errors.
//
// Everything the function prints, and what RIE logs about it (START, END,
// REPORT lines and the emulator's own log), is handed line by line to
// Config.Logs (and, with the log stream of the execution environment that
// printed it, to Config.StreamLogs); the lines of one invocation are
// delivered before Invoke returns. RIE prints the memory size as "Max Memory
// Used" on every REPORT line; the line is rewritten with the runtime
// process's measured peak resident memory (VmHWM), as Lambda reports it.
package rie
