package standin

import "syscall"

// KillMoto ends the moto s started as a crash would (SIGKILL), not as Stop
// does.
func KillMoto(s *Server) error { return syscall.Kill(s.pid, syscall.SIGKILL) }
