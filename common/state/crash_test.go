package state

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crashWriterEnv makes TestCrashWriter act as the writer process, saving
// generations into the checkpoint at the path it holds.
const crashWriterEnv = "NRI_STATE_CRASH_WRITER"

type generation struct {
	Gen  int    `json:"gen"`
	Blob string `json:"blob"`
}

// generationOf is the only content generation gen may have. At 30 KB it
// encodes quickly even under the race detector, so that a writer spends much
// of its time writing and syncing, where a random kill should land.
func generationOf(gen int) generation {
	return generation{Gen: gen, Blob: strings.Repeat(fmt.Sprintf("%09d|", gen), 3_000)}
}

// TestCrashWriter is the writer process of TestCheckpointSurvivesKilledWriter:
// it continues from the checkpoint's generation and prints each generation
// once its Save has returned.
func TestCrashWriter(t *testing.T) {
	path := os.Getenv(crashWriterEnv)
	if path == "" {
		t.Skip("the writer process of TestCheckpointSurvivesKilledWriter")
	}
	c, err := NewCheckpoint[generation](path, 1)
	require.NoError(t, err)
	last, _, err := c.Load()
	require.NoError(t, err)
	// Bounded so that a writer nobody kills still ends.
	for gen := last.Gen + 1; gen <= last.Gen+10000; gen++ {
		require.NoError(t, c.Save(generationOf(gen)))
		_, err := fmt.Fprintln(os.Stdout, gen)
		require.NoError(t, err)
	}
}

func TestCheckpointSurvivesKilledWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crash.json")
	c, err := NewCheckpoint[generation](path, 1)
	require.NoError(t, err)
	require.NoError(t, c.Save(generationOf(0)))

	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	// At least minKills, and more until one lands mid-write (a temp file left
	// behind), which on a fast filesystem can take a while.
	const minKills, maxKills = 50, 500
	kills, last, tempLeft, inFlight := 0, 0, 0, 0
	for ; kills < minKills || (tempLeft == 0 && kills < maxKills); kills++ {
		reported := killWriterAtRandom(t, path, rng)
		require.Greater(t, reported, last, "kill %d: the writer made progress", kills)

		if _, err := os.Stat(tempPath(path)); err == nil {
			tempLeft++
		}
		got, found, err := c.Load()
		require.NoError(t, err, "kill %d", kills)
		require.True(t, found, "kill %d", kills)
		// Generation reported was saved; reported+1 may have been renamed
		// into place just before the kill.
		require.Contains(t, []int{reported, reported + 1}, got.Gen, "kill %d", kills)
		require.Equal(t, generationOf(got.Gen), got, "kill %d: the content of generation %d", kills, got.Gen)
		if got.Gen == reported+1 {
			inFlight++
		}
		require.Equal(t, []string{lockName, "crash.json"}, dirNames(t, dir), "kill %d: nothing left behind", kills)
		last = got.Gen
	}
	t.Logf("%d kills: %d left a temp file (killed mid-write), %d after the rename but before reporting, %d generations written",
		kills, tempLeft, inFlight, last)
	require.Positive(t, tempLeft, "no kill landed mid-write")
}

// killWriterAtRandom starts a writer, times one of its save cycles, SIGKILLs
// it at a random moment within the next cycle and returns the last generation
// it reported saved.
func killWriterAtRandom(t *testing.T, path string, rng *rand.Rand) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
	// Should this test die first, the writer dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	saved := make(chan int, 16384)
	go func() {
		defer close(saved)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if gen, err := strconv.Atoi(scanner.Text()); err == nil {
				saved <- gen
			}
		}
	}()
	nextSave := func() int {
		select {
		case gen, ok := <-saved:
			if ok {
				return gen
			}
		case <-time.After(time.Minute):
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		require.FailNow(t, "the writer stopped saving", "stderr: %s", stderr.String())
		return 0
	}

	nextSave()
	begin := time.Now()
	reported := nextSave()
	cycle := time.Since(begin)
	time.Sleep(time.Duration(rng.Int64N(int64(cycle))))
	require.NoError(t, cmd.Process.Kill())
	for gen := range saved {
		reported = gen
	}
	waitErr := cmd.Wait()
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL,
		"the writer ended by itself (%v); stderr: %s", waitErr, stderr.String())
	return reported
}
