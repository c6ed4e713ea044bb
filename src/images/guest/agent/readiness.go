// The instance's readiness, checked in the agent when the host's hello asks for it:
// what the host otherwise learns by running `cd "$HOME" && test -w . && exec id -u` as
// the VM user, a command that costs a connection, a fork and two program starts in the
// guest on every create. Here it is a few system calls on a thread that takes the VM
// user's identity (asUser), so it answers with the same rights the command would have.
package main

import (
	"fmt"
	"syscall"
)

// checkReadiness says what keeps the VM user from working in its home ("" when
// nothing does): the home must be a directory the user can enter and write (search
// rights on every directory above it included, as for `cd`), and a shell the user can
// run must be on the default PATH, since every command starts as `sh -c`.
func checkReadiness(c *readyCheck) string {
	err := asUser(c.UID, c.GID, func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(c.Home, &st); err != nil {
			return fmt.Errorf("cannot reach its home %s: %w", c.Home, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fmt.Errorf("its home %s is not a directory", c.Home)
		}
		// access(2) checks the real uid and gid, which asUser set as well.
		if err := syscall.Access(c.Home, 0o2|0o1); err != nil {
			return fmt.Errorf("cannot enter and write its home %s: %w", c.Home, err)
		}
		shell, err := lookPath("sh", nil)
		if err != nil {
			return fmt.Errorf("has no shell: %w", err)
		}
		if err := syscall.Access(shell, 0o1); err != nil {
			return fmt.Errorf("cannot run %s: %w", shell, err)
		}
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return ""
}
