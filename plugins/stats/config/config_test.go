package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/quote"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Config
		wantErr  string
	}{
		{"empty: defaults", "", Config{Cache: time.Second}, ""},
		{"both keys", "cache: 250ms\nworkers: 8\n", Config{Cache: 250 * time.Millisecond, Workers: 8}, ""},
		{"no cache", "cache: 0s\n", Config{}, ""},
		{"interval", "interval: 10s\n", Config{Cache: time.Second, Interval: 10 * time.Second}, ""},
		{"interval off", "interval: 0s\n", Config{Cache: time.Second}, ""},
		{"interval too short", "interval: 10ms\n", Config{}, `interval "10ms": expected 0 (read on scrape) or a duration from 1s to 10m0s`},
		{"interval not a duration", "interval: often\n", Config{}, `interval "often"`},
		{"unknown key", "period: 1s\n", Config{}, "period"},
		{"bad duration", "cache: soon\n", Config{}, `cache "soon": expected a duration`},
		{"negative", "cache: -1s\n", Config{}, "from 0s to 1m0s"},
		{"too long", "cache: 2m\n", Config{}, "from 0s to 1m0s"},
		{"too many workers", "workers: 65\n", Config{}, "workers 65: expected 0"},
		{"cache of a megabyte", "cache: " + strings.Repeat("1", 1<<20) + "s\n", Config{}, `cache "1111`},
		{"interval of a megabyte", "interval: " + strings.Repeat("x", 1<<20) + "\n", Config{}, "…(1048576 bytes): expected 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in), "stats.yaml")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tc.wantErr)
				assert.ErrorContains(t, err, "stats.yaml")
				assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes a bounded prefix")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "cache: 1s\nworkers: 2\n", "cache: [", "workers: -1", "cache: 1h", "interval: " + strings.Repeat("9", 1<<13)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz")
		if err != nil {
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "errors quote bounded prefixes")
			return
		}
		if cfg.Cache < 0 || cfg.Cache > MaxCache || cfg.Workers < 0 || cfg.Workers > MaxWorkers ||
			(cfg.Interval != 0 && (cfg.Interval < MinInterval || cfg.Interval > MaxInterval)) {
			t.Fatalf("Parse(%q) accepted %+v, out of bounds", data, cfg)
		}
	})
}
