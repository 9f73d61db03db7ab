//go:build unix

package devserver

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive, non-blocking advisory lock on f. The kernel releases it
// when the process exits, even on kill -9, so a stale lock file never blocks a restart.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
