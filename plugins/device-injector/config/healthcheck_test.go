package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHealthChecks(t *testing.T) {
	cfg, err := Parse([]byte(`health-check-concurrency: 2
health-checks:
- devices: ["vendor.com/gpu=*", "/dev/dri/*"]
  command: [/usr/bin/gpu-check, --device, "{device}", "--index={name}"]
  timeout: 1500ms
- devices: ["vendor.com/nic=*"]
  file: /run/nic/{name}/state
  expect: "up|ok"
`), "test.yaml")
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.CheckConcurrency)
	require.Len(t, cfg.HealthChecks, 2)
	gpu, nic := cfg.HealthChecks[0], cfg.HealthChecks[1]
	assert.Equal(t, "health-checks[0]", gpu.Key)
	assert.Equal(t, 1500*time.Millisecond, gpu.Timeout)
	assert.Equal(t, DefaultCheckTimeout, nic.Timeout)

	for _, tc := range []struct {
		check    HealthCheck
		id       string
		matches  bool
		wantArgv []string
		wantFile string
	}{
		{gpu, "vendor.com/gpu=3", true, []string{"/usr/bin/gpu-check", "--device", "vendor.com/gpu=3", "--index=3"}, ""},
		{gpu, "/dev/dri/card0", true, []string{"/usr/bin/gpu-check", "--device", "/dev/dri/card0", "--index=card0"}, ""},
		{gpu, "/dev/dri/by-path/x", false, nil, ""},
		{gpu, "vendor.com/nic=0", false, nil, ""},
		{nic, "vendor.com/nic=eth1", true, nil, "/run/nic/eth1/state"},
	} {
		t.Run(tc.check.Key+"/"+tc.id, func(t *testing.T) {
			assert.Equal(t, tc.matches, tc.check.Matches(tc.id))
			if !tc.matches {
				return
			}
			argv, file := tc.check.For(tc.id)
			assert.Equal(t, tc.wantArgv, argv)
			assert.Equal(t, tc.wantFile, file)
		})
	}
	// expect matches the whole content, not a part of it.
	assert.True(t, nic.Expect.MatchString("up"))
	assert.False(t, nic.Expect.MatchString("upset"))
	assert.False(t, nic.Expect.MatchString("not ok"))
}

func TestParseHealthChecksErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		wantErr []string
	}{
		{"no devices", "health-checks:\n- command: [/bin/true]\n",
			[]string{"health-checks[0].devices", "empty", "vendor.com/gpu=*"}},
		{"class pattern without name", "health-checks:\n- devices: [\"vendor.com/gpu\"]\n  command: [/bin/true]\n",
			[]string{"health-checks[0].devices", `"vendor.com/gpu"`, "vendor/class=name"}},
		{"bad glob", "health-checks:\n- devices: [\"/dev/[\"]\n  command: [/bin/true]\n",
			[]string{"health-checks[0].devices", `"/dev/["`, "syntax error in pattern"}},
		{"nothing to do", "health-checks:\n- devices: [\"a.com/b=*\"]\n",
			[]string{"health-checks[0]", "neither command nor file"}},
		{"relative command", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [check]\n",
			[]string{"health-checks[0].command", `"check"`, "absolute path"}},
		{"unknown placeholder", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [/bin/check, \"{dev}\"]\n",
			[]string{"health-checks[0].command", `"{dev}"`, "unknown placeholder {dev}", "{device} or {name}"}},
		{"bad timeout", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [/bin/true]\n  timeout: soon\n",
			[]string{"health-checks[0].timeout", `"soon"`, "duration such as 5s"}},
		{"timeout too long", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [/bin/true]\n  timeout: 1h\n",
			[]string{"health-checks[0].timeout", `"1h"`, "between 10ms and 1m0s"}},
		{"file without expect", "health-checks:\n- devices: [\"a.com/b=*\"]\n  file: /run/x\n",
			[]string{"health-checks[0].file", `"/run/x"`, "expect is missing"}},
		{"expect without file", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [/bin/true]\n  expect: ok\n",
			[]string{"health-checks[0].expect", `"ok"`, "no file"}},
		{"relative file", "health-checks:\n- devices: [\"a.com/b=*\"]\n  file: run/x\n  expect: ok\n",
			[]string{"health-checks[0].file", `"run/x"`, "absolute"}},
		{"bad expect", "health-checks:\n- devices: [\"a.com/b=*\"]\n  file: /run/x\n  expect: \"(\"\n",
			[]string{"health-checks[0].expect", `"("`, "regular expression"}},
		{"second check named", "health-checks:\n- devices: [\"a.com/b=*\"]\n  command: [/bin/true]\n- devices: []\n  command: [/bin/true]\n",
			[]string{"health-checks[1].devices"}},
		{"unknown key", "health-checks:\n- devices: [\"a.com/b=*\"]\n  cmd: [/bin/true]\n",
			[]string{"test.yaml", `unknown key "health-checks[0].cmd"`}},
		{"concurrency zero", "health-check-concurrency: 0\n",
			[]string{"health-check-concurrency", "0", "expected 1 to 64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "test.yaml")
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
