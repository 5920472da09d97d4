// Package lambdamain is what every function's thin main needs before
// lambda.Start: the AWS configuration, and configuration errors that stop
// the function at init naming the variable, as Lambda reports an init failure;
// and Typed, a typed handler whose payload, when not a JSON object, is
// refused saying what it is.
package lambdamain
