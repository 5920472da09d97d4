package standin

import "syscall"

// KillMoto ends the moto s started as a crash would (SIGKILL), not as Stop
// does.
func KillMoto(s *Server) error { return syscall.Kill(s.pid, syscall.SIGKILL) }

// MotoPID is the process id of the moto s started.
func MotoPID(s *Server) int { return s.pid }
