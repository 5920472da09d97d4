// Package syncbuf is a bytes.Buffer that one goroutine may read while
// others write it: for tests that watch a command's progress or a
// function's log as it runs.
package syncbuf
