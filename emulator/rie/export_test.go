package rie

// SetFreePort makes the emulators' ports come from pick until restore is
// called.
func SetFreePort(pick func() (int, error)) (restore func()) {
	old := freePort
	freePort = pick
	return func() { freePort = old }
}
