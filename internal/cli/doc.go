// Package cli is what the operator commands (cmd/replay, cmd/redrive,
// cmd/snapshot) share: parsing that names the wrong flag in one line and
// exits 0 on -h, range checks that say the allowed range, one exit status
// per outcome, and an AWS configuration that refuses to guess a region and
// whose SDK log leaves out the warning about draining an answer whose call
// an interrupt had already ended (it told a user nothing).
package cli
