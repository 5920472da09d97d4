package nodepeer

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Peer is one of the peer's scripts and the node that runs it.
type Peer struct {
	Node   string
	Script string
}

// Prepare finds node and installs the peer's packages (npm ci) when missing,
// for script (run.mjs, worker.mjs) under <root>/scripts/bench/powertools.
func Prepare(ctx context.Context, root, script string, log io.Writer) (Peer, error) {
	dir := filepath.Join(root, "scripts", "bench", "powertools")
	node, err := exec.LookPath("node")
	if err != nil {
		return Peer{}, fmt.Errorf("node is not on PATH: the Powertools peer is a Node program (Node 20 or later): %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return Peer{}, fmt.Errorf("npm is not on PATH: it installs the Powertools peer's packages in %s: %w", dir, err)
		}
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
		if err := cmd.Run(); err != nil {
			return Peer{}, fmt.Errorf("npm ci in %s: %w", dir, err)
		}
	}
	return Peer{Node: node, Script: filepath.Join(dir, script)}, nil
}
