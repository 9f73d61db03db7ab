package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procWatch reads the CPU time of other processes of this machine (a Temporal server,
// its database, `wop worker` and `wop api` processes), each with every process below
// it (a PostgreSQL server is one process per connection), so a turn's CPU can be split
// by process. It reads Linux's /proc; elsewhere it reads nothing.
type procWatch struct {
	// pids are the watched processes by the name the figures carry.
	pids map[string]int
}

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const clockTicks = 100

// sample reads the CPU time of each watched process tree now.
func (w *procWatch) sample() map[string]time.Duration {
	if w == nil || len(w.pids) == 0 {
		return nil
	}
	stats := readProcStats()
	children := map[int][]int{}
	for pid, st := range stats {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	out := map[string]time.Duration{}
	for name, root := range w.pids {
		var ticks int64
		seen := map[int]bool{}
		stack := []int{root}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[pid] {
				continue
			}
			seen[pid] = true
			if st, ok := stats[pid]; ok {
				ticks += st.ticks
			}
			stack = append(stack, children[pid]...)
		}
		out[name] = time.Duration(ticks) * time.Second / clockTicks
	}
	return out
}

// since is the CPU time each watched process tree used since before (a sample).
// A process that ended meanwhile takes its time with it, so a tree whose connections
// come and go reads low; the database's stay open here.
func (w *procWatch) since(before map[string]time.Duration) map[string]time.Duration {
	if before == nil {
		return nil
	}
	now := w.sample()
	out := map[string]time.Duration{}
	for k, v := range now {
		out[k] = max(v-before[k], 0)
	}
	return out
}

type procStat struct {
	ppid  int
	ticks int64 // utime + stime
}

// readProcStats reads /proc/*/stat.
func readProcStats() map[int]procStat {
	out := map[int]procStat{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		pid, st, ok := parseProcStat(string(data))
		if ok {
			out[pid] = st
		}
	}
	return out
}

// parseProcStat reads the pid, the parent's pid and utime+stime of one /proc/<pid>/stat
// line; the command name (field 2, in parentheses) may hold spaces.
func parseProcStat(line string) (int, procStat, bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return 0, procStat{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return 0, procStat{}, false
	}
	f := strings.Fields(line[end+1:])
	// After the name: state(3) ppid(4) ... utime(14) stime(15), so f[0] is field 3.
	if len(f) < 13 {
		return 0, procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	stt, err3 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, procStat{}, false
	}
	return pid, procStat{ppid: ppid, ticks: ut + stt}, true
}

// parseCPUProcess reads a --cpu-process value: NAME=PID.
func parseCPUProcess(v string) (string, int, error) {
	name, p, ok := strings.Cut(v, "=")
	pid, err := strconv.Atoi(p)
	if !ok || name == "" || err != nil || pid <= 0 {
		return "", 0, fmt.Errorf("want NAME=PID, got %q", v)
	}
	return name, pid, nil
}
