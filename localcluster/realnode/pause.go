// A minimal pause process for the CRI sandbox (stand-in for registry.k8s.io/pause, which cannot be
// pulled here): sleep until SIGINT/SIGTERM, reaping any zombie children meanwhile (it is PID 1 of
// the pod's PID namespace when one is shared). Build: CGO_ENABLED=0 go build -o pause pause.go
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
