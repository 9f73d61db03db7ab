package main

import (
	"os"
	"os/signal"
	"syscall"
)

// onHangup calls reload on every SIGHUP until the returned stop is called. `wop api`
// and `wop dev` reload their keys file this way (they also notice a changed file by
// themselves); without it a SIGHUP would end the process.
func onHangup(reload func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				reload()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
