// Package nodepeer prepares the Powertools benchmark peer: the Node programs
// in scripts/bench/powertools, with their pinned npm packages installed.
package nodepeer
