//go:build !unix

package devserver

import "os"

// tryLock is a no-op where flock(2) is unavailable: the lock file records the pid but
// does not guard against a second process.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }
