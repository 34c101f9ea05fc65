package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample keyed by
// its series as written ("name" or "name{labels}").
type Metrics map[string]float64

// ParseMetrics reads the Prometheus text exposition format, skipping
// comments and samples it cannot read.
func ParseMetrics(text string) Metrics {
	m := Metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The series ends at the last space outside the label braces; an
		// optional timestamp follows the value.
		series, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		m[series] = v
	}
	return m
}

// Sum adds up every series of the metric name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var total float64
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			total += v
		}
	}
	return total
}

// Scrape fetches and parses http://addr/metrics.
func Scrape(addr string) (Metrics, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(b)), nil
}

// ScrapeAPIServer fetches and parses the API server's /metrics through cs.
func ScrapeAPIServer(ctx context.Context, cs kubernetes.Interface) (Metrics, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(raw)), nil
}

// FileSize is the size of the file at path (a log the benchmarks count
// lines of), 0 when it cannot be read.
func FileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// ReadFrom is what the file at path holds from offset off on (what a log
// gained since FileSize was taken), "" when it cannot be read.
func ReadFrom(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	raw, _ := io.ReadAll(f)
	return string(raw)
}

// ProcMem is the memory the kernel reports for a process.
type ProcMem struct {
	// RSS is the resident set size now (VmRSS), in bytes.
	RSS float64
	// HWM is the peak resident set size (VmHWM), in bytes.
	HWM float64
	// Anon is the anonymous part of RSS (RssAnon: heap, stacks), in bytes.
	Anon float64
	// File is the file-backed part of RSS (RssFile: mostly the binary's
	// own pages, which the kernel can drop and read again), in bytes.
	File float64
}

// ParseProcStatus reads VmRSS and VmHWM, and RssAnon and RssFile where the
// kernel reports them, from the text of /proc/<pid>/status.
func ParseProcStatus(text string) (ProcMem, error) {
	var pm ProcMem
	fields := map[string]*float64{"VmRSS": &pm.RSS, "VmHWM": &pm.HWM, "RssAnon": &pm.Anon, "RssFile": &pm.File}
	var seen int
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		dst, known := fields[key]
		if !ok || !known {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return pm, fmt.Errorf("unexpected %s line %q", key, line)
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return pm, fmt.Errorf("%s: %w", key, err)
		}
		*dst = kb * 1024
		if key == "VmRSS" || key == "VmHWM" {
			seen++
		}
	}
	if seen != 2 {
		return pm, fmt.Errorf("VmRSS or VmHWM missing from process status")
	}
	return pm, nil
}

// ReadProcMem reads /proc/<pid>/status.
func ReadProcMem(pid int) (ProcMem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMem{}, err
	}
	return ParseProcStatus(string(b))
}

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in
// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

// ParseProcStat returns the CPU time (user + system, all threads) from the
// text of /proc/<pid>/stat.
func ParseProcStat(text string) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing parenthesis.
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed process stat")
	}
	f := strings.Fields(text[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("process stat has %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// ReadProcCPU reads the CPU time a process has used so far.
func ReadProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseProcStat(string(b))
}

// MachineCPU is the machine-wide CPU time from the first line of /proc/stat.
type MachineCPU struct {
	// Busy is the time all CPUs spent on anything but idle and I/O wait.
	Busy time.Duration
	// Total is the time all CPUs have counted, busy or not.
	Total time.Duration
}

// Sub is the CPU time between an earlier reading o and m.
func (m MachineCPU) Sub(o MachineCPU) MachineCPU {
	return MachineCPU{Busy: m.Busy - o.Busy, Total: m.Total - o.Total}
}

// Add sums the CPU time of two spans.
func (m MachineCPU) Add(o MachineCPU) MachineCPU {
	return MachineCPU{Busy: m.Busy + o.Busy, Total: m.Total + o.Total}
}

// Share is the busy share of a span of CPU time (NaN when it is empty).
func (m MachineCPU) Share() float64 {
	return Ratio(float64(m.Busy), float64(m.Total))
}

// ParseMachineStat reads the aggregate "cpu" line of /proc/stat.
func ParseMachineStat(text string) (MachineCPU, error) {
	line, _, _ := strings.Cut(text, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("no aggregate cpu line in /proc/stat")
	}
	var total, idle int64
	for i, s := range f[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		if i >= 8 { // guest times are already inside user and nice
			break
		}
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	tick := time.Second / clockTicks
	return MachineCPU{Busy: time.Duration(total-idle) * tick, Total: time.Duration(total) * tick}, nil
}

// ReadMachineCPU reads /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	return ParseMachineStat(string(b))
}

// SaveURL writes what a GET of url answers to path.
func SaveURL(url, path string) error {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
