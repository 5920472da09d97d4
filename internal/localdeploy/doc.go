// Package localdeploy reads a synthesized template as the local runner
// deploys it (names <stack>-<logical id>), for the operator commands that
// take their names from -template and -stack — results, tail, setaside —
// so their make targets need no names, and for replay, which checks the
// pipelines it is given against those the running template deploys. Its
// errors are usage errors naming the flag at fault.
package localdeploy
