package rie

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// Install makes sure aws-lambda-rie is at <repo root>/.tools/bin and returns
// its path, running `go install` of the pinned Version if it is missing. It
// holds a file lock so parallel test binaries install once. log receives the
// installer's output; nil discards it.
func Install(ctx context.Context, log io.Writer) (string, error) {
	root, err := standin.RepoRoot()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(root, ".tools", "bin")
	bin := filepath.Join(binDir, "aws-lambda-rie")
	if fileExists(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("rie: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".aws-lambda-rie.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("rie: lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("rie: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fileExists(bin) {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("rie: %s is missing and the go command is not on PATH to install it: %w", bin, err)
	}
	if log == nil {
		log = io.Discard
	}
	cmd := exec.CommandContext(ctx, goBin, "install", rieModule+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+binDir, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rie: installing %s@%s: %w", rieModule, Version, err)
	}
	return bin, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
