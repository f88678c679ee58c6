package simulate

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/internal/testenv"
)

// chromium is Debian's chromium package (e2e/runtime/tools/apt-packages.txt).
const chromium = "/usr/bin/chromium"

// TestHTMLMapInABrowser writes the placement map of a run with exclusive
// grants, reserved CPUs and the shared pool, opens it in headless
// Chromium, and reads the screenshot: every CPU's cell, where the layout
// puts it, must have the colour of what holds the CPU at the end (each
// container its own colour). It skips without Chromium, except under CI.
func TestHTMLMapInABrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("%s: %v (apt-get install chromium)", chromium, err))
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "map.html")
	c := goldenCase{workload: "devices", fixture: fixture80, config: "config-single-numa"}
	r := decodeReport(t, mustRun(t, append(c.args(), "--html", page)...))
	topo, err := sysfs.Discover(filepath.Join(fixtureDir(c.fixture), "sysfs"))
	require.NoError(t, err)

	// What the map must show: each exclusive container's CPUs in its
	// colour, in the order of the final state, the reserved and the
	// shared CPUs in theirs.
	want := map[int]string{}
	for _, id := range parse(t, r.Final.SharedCPUs).List() {
		want[id] = colourShared
	}
	for _, id := range parse(t, r.Machine.Reserved).List() {
		want[id] = colourReserved
	}
	holders := 0
	for _, ctr := range r.Final.Containers {
		if ctr.Pool == "exclusive" {
			for _, id := range parse(t, ctr.CPUs).List() {
				want[id] = containerColour(holders)
			}
			holders++
		}
	}
	require.Equal(t, 4, holders, "the devices workload ends with 4 exclusive containers")
	require.Len(t, want, topo.CPUs().Size(), "every CPU is held by something")

	layout := layoutMachine(topo)
	shot := screenshot(t, page, layout.Width+20, layout.Height+20)
	for id, colour := range want {
		cell := layout.CPUs[id]
		// Inside the cell's border, away from its number in the middle.
		for _, at := range []image.Point{{cell.X + 3, cell.Y + 3}, {cell.X + cell.W - 4, cell.Y + cell.H - 4}} {
			assert.True(t, sameColour(shot.At(at.X, at.Y), colour), "cpu %d at %v: %s in the screenshot, expected %s", id, at, hexOf(shot.At(at.X, at.Y)), colour)
		}
	}

	html, err := os.ReadFile(page)
	require.NoError(t, err)
	for _, text := range []string{
		"The shared pool: cpus " + r.Final.SharedCPUs, // listed with its containers
		"ml/late/worker", "single-numa-node", // a refusal and why
		"ml/infer/model", // a holder in the legend
	} {
		assert.Contains(t, string(html), text)
	}
}

// screenshot opens page in headless Chromium, in a fresh profile, and
// decodes its screenshot of a width x height window.
func screenshot(t *testing.T, page string, width, height int) image.Image {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--hide-scrollbars", "--force-device-scale-factor=1",
		"--screenshot="+out, fmt.Sprintf("--window-size=%d,%d", width, height), "file://"+page)
	// Its helper processes go with it, on a timeout too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	require.NoError(t, cmd.Run(), "chromium: %s", output.String())
	f, err := os.Open(out)
	require.NoError(t, err, "chromium wrote no screenshot: %s", output.String())
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, image.Pt(width, height), img.Bounds().Size())
	return img
}

// sameColour tells whether the pixel is the CSS colour, within what a
// renderer may round.
func sameColour(c color.Color, css string) bool {
	var r, g, b int
	_, _ = fmt.Sscanf(strings.TrimPrefix(css, "#"), "%02x%02x%02x", &r, &g, &b)
	pr, pg, pb, _ := c.RGBA()
	near := func(a uint32, b int) bool { return abs(int(a>>8)-b) <= 3 }
	return near(pr, r) && near(pg, g) && near(pb, b)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func hexOf(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
}

// TestLayoutMachine: every CPU has a cell of its own, inside the map, in
// the box of its NUMA node.
func TestLayoutMachine(t *testing.T) {
	for _, fixture := range []string{fixture12, fixture80, fixture256, "smt-8s-8n-512c"} {
		topo, err := sysfs.Discover(filepath.Join(fixtureDir(fixture), "sysfs"))
		require.NoError(t, err)
		l := layoutMachine(topo)
		require.Len(t, l.CPUs, topo.CPUs().Size(), fixture)
		nodes := map[string]rect{}
		for _, b := range l.Boxes {
			if b.Class == "node" {
				nodes[b.Label] = b.rect
			}
		}
		var cells []rect
		for id, c := range l.CPUs {
			assert.True(t, c.X >= 0 && c.Y >= 0 && c.X+c.W <= l.Width && c.Y+c.H <= l.Height, "%s: cpu %d outside the map", fixture, id)
			node, _ := topo.NodeOfCPU(id)
			box, ok := nodes[fmt.Sprintf("NUMA node %d", node)]
			if assert.True(t, ok, "%s: node %d has no box", fixture, node) {
				assert.True(t, c.X >= box.X && c.Y >= box.Y && c.X+c.W <= box.X+box.W && c.Y+c.H <= box.Y+box.H, "%s: cpu %d outside its node's box", fixture, id)
			}
			for _, o := range cells {
				assert.False(t, c.X < o.X+o.W && o.X < c.X+c.W && c.Y < o.Y+o.H && o.Y < c.Y+c.H, "%s: cpu %d's cell overlaps another", fixture, id)
			}
			cells = append(cells, c)
		}
		assert.LessOrEqual(t, l.Width, mapMaxWidth+2*groupPad, fixture)
	}
}
