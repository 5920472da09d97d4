// Command binary measures each function's binary and cold start against an
// aws-lambda-go hello world built the same way (bench/binary/hello):
//
//   - size: the deployed artifact, built as the Makefile builds it
//     (GOOS=linux GOARCH=arm64 CGO_ENABLED=0, -tags lambda.norpc -trimpath
//     -ldflags='-s -w');
//   - cold start: the same build for this machine's architecture, run
//     under aws-lambda-rie (package rie) with the environment it needs, from
//     the first invocation — the emulator starts the bootstrap then — to its
//     response, the median of -runs fresh execution environments
//     (round after round over every function). The
//     invocation is the cheapest the function answers (an empty batch, a
//     request it refuses), so the figure is the process start and init,
//     plus one handler call that does next to nothing. Functions whose init
//     or first call reaches AWS talk to a private stand-in (moto) on
//     127.0.0.1.
//
// It prints, per function,
//
//	BENCH binary fn=<name> mb=<x> hello_ratio=<x> init_ms=<x> init_hello_ratio=<x>
//
// and the hello world's own line (fn=hello), with the spread on
// BENCH binary_spread lines, which also give the same environment's second
// (warm) invocation and the difference: the first call of the ticker (a
// query), of detect (it reads the rules' version from its rules table
// before any batch, as deployed) and of snapshot (it asks the stand-in for
// a profiles table that does not exist, and answers with that error)
// reach the stand-in, so their init_ms holds that round trip too, and
// cold_extra_ms is the start alone. Functions that find the views table
// through an SSM parameter when deployed are given its name directly, so
// their init makes no request here. Run: go run ./bench/binary [-runs 9].
package main
