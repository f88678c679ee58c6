// Package config is the stats plugin's YAML configuration: whether the
// cgroups are read on scrape (and how long a reading serves scrapes) or in
// the background at an interval, and how many cgroups are read in parallel. It is decoded strictly (an unknown key is an error naming it)
// and checked at load. Keys and defaults are in the plugin's README.md.
package config

import (
	"fmt"
	"time"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Bounds keep a typo from turning scrapes into a busy loop or a stale view.
const (
	DefaultCache = time.Second
	MaxCache     = time.Minute
	MaxWorkers   = 64
	MinInterval  = time.Second
	MaxInterval  = 10 * time.Minute
)

// Config is the checked configuration.
type Config struct {
	// Cache is how long one reading of the cgroups serves scrapes.
	Cache time.Duration
	// Interval, when positive, reads the cgroups in the background at this
	// period and scrapes serve the last reading (0: read on scrape).
	Interval time.Duration
	// Workers is how many cgroups are read in parallel; 0: one per CPU, at
	// most 4.
	Workers int
}

// File is the YAML document.
type File struct {
	// Cache is a Go duration, 0 to 1m (default 1s).
	Cache string `yaml:"cache"`
	// Interval is 0 (read on scrape, default) or a Go duration from 1s to 10m.
	Interval string `yaml:"interval"`
	// Workers is 0 (automatic) to 64.
	Workers int `yaml:"workers"`
}

// Parse decodes and checks data (from source, for errors).
func Parse(data []byte, source string) (Config, error) {
	f := File{Cache: DefaultCache.String()}
	if err := plugin.DecodeConfig(data, source, &f); err != nil {
		return Config{}, err
	}
	cache, err := time.ParseDuration(f.Cache)
	if err != nil || cache < 0 || cache > MaxCache {
		return Config{}, fmt.Errorf("%s: cache %s: expected a duration from 0s to %s, such as 1s", source, quote.Value(f.Cache), MaxCache)
	}
	interval := time.Duration(0)
	if f.Interval != "" && f.Interval != "0" {
		interval, err = time.ParseDuration(f.Interval)
		if err != nil || (interval != 0 && (interval < MinInterval || interval > MaxInterval)) {
			return Config{}, fmt.Errorf("%s: interval %s: expected 0 (read on scrape) or a duration from %s to %s, such as 10s", source, quote.Value(f.Interval), MinInterval, MaxInterval)
		}
	}
	if f.Workers < 0 || f.Workers > MaxWorkers {
		return Config{}, fmt.Errorf("%s: workers %d: expected 0 (one per CPU, at most 4) to %d", source, f.Workers, MaxWorkers)
	}
	return Config{Cache: cache, Interval: interval, Workers: f.Workers}, nil
}
