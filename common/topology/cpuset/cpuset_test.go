package cpuset

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/quote"
)

func mustParse(t testing.TB, s string) CPUSet {
	t.Helper()
	set, err := Parse(s)
	require.NoError(t, err)
	return set
}

func TestParse(t *testing.T) {
	tests := []struct {
		in        string
		list      []int
		canonical string
	}{
		{in: "", list: []int{}, canonical: ""},
		{in: "\n", list: []int{}, canonical: ""},
		{in: "0", list: []int{0}, canonical: "0"},
		{in: "0-3,8,10-11\n", list: []int{0, 1, 2, 3, 8, 10, 11}, canonical: "0-3,8,10-11"},
		{in: "3,2,1,0", list: []int{0, 1, 2, 3}, canonical: "0-3"},
		{in: "0,1", list: []int{0, 1}, canonical: "0-1"},
		{in: "5-5", list: []int{5}, canonical: "5"},
		{in: "0-4,2-6", list: []int{0, 1, 2, 3, 4, 5, 6}, canonical: "0-6"},
		{in: "63,64,127,128", list: []int{63, 64, 127, 128}, canonical: "63-64,127-128"},
		{in: "0,2,4,6,8,10", list: []int{0, 2, 4, 6, 8, 10}, canonical: "0,2,4,6,8,10"},
		{in: "007", list: []int{7}, canonical: "7"},
		{in: "65535", list: []int{65535}, canonical: "65535"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			set := mustParse(t, tt.in)
			assert.Equal(t, tt.list, set.List())
			assert.Equal(t, tt.canonical, set.String())
			assert.Equal(t, len(tt.list), set.Size())
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in    string
		token string
		want  string
	}{
		{in: "a", token: `"a"`, want: "expected a CPU id"},
		{in: "0-3,x", token: `"x"`, want: "expected a CPU id"},
		{in: "0,,1", token: `""`, want: "expected a CPU id"},
		{in: "0,", token: `""`, want: "expected a CPU id"},
		{in: "-1", token: `"-1"`, want: "expected a CPU id"},
		{in: "1-", token: `"1-"`, want: "expected a CPU id"},
		{in: "3-1", token: `"3-1"`, want: "range end 1 is below its start 3"},
		{in: "1-2-3", token: `"1-2-3"`, want: "expected a CPU id"},
		{in: "+1", token: `"+1"`, want: "expected a CPU id"},
		{in: "0 - 3", token: `"0 - 3"`, want: "expected a CPU id"},
		{in: "65536", token: `"65536"`, want: "above the maximum 65535"},
		{in: "0-99999999999999999999", token: `"0-99999999999999999999"`, want: "above the maximum"},
		{in: "0-7:2/4", token: `"0-7:2/4"`, want: "expected a CPU id"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `parse cpu list "`+tt.in+`"`)
			assert.Contains(t, err.Error(), "bad token "+tt.token)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestAlgebra(t *testing.T) {
	a := mustParse(t, "0-7,200-255")
	b := mustParse(t, "4-11,255")
	assert.Equal(t, "0-11,200-255", a.Union(b).String())
	assert.Equal(t, "4-7,255", a.Intersection(b).String())
	assert.Equal(t, "0-3,200-254", a.Difference(b).String())
	assert.Equal(t, "8-11", b.Difference(a).String())
	assert.True(t, a.Intersection(b).IsSubsetOf(a))
	assert.False(t, a.IsSubsetOf(b))
	assert.True(t, CPUSet{}.IsSubsetOf(b))

	// Results are canonical: sets equal by value are also deeply equal.
	high := mustParse(t, "200")
	low := mustParse(t, "1")
	assert.True(t, reflect.DeepEqual(low, low.Union(high).Difference(high)))
	assert.True(t, reflect.DeepEqual(CPUSet{}, high.Difference(high)))
	assert.True(t, reflect.DeepEqual(CPUSet{}, low.Intersection(high)))

	// Operations leave their operands alone.
	assert.Equal(t, "0-7,200-255", a.String())
	assert.Equal(t, "4-11,255", b.String())
}

func TestQueries(t *testing.T) {
	s := mustParse(t, "1,3,64-65")
	assert.True(t, s.Contains(64))
	assert.False(t, s.Contains(2))
	assert.False(t, s.Contains(-1))
	assert.False(t, s.Contains(100000))
	assert.Equal(t, 1, s.Min())
	assert.Equal(t, -1, CPUSet{}.Min())
	assert.True(t, CPUSet{}.IsEmpty())
	assert.False(t, s.IsEmpty())
	assert.True(t, s.Equal(New(65, 64, 3, 1, 1)))
	assert.False(t, s.Equal(New(1, 3, 64)))
	assert.Equal(t, []int{}, CPUSet{}.List())
}

func TestNewAndRange(t *testing.T) {
	assert.Equal(t, "0,5", New(5, -1, 0, MaxCPU+1).String())
	assert.Equal(t, "3-6", Range(3, 6).String())
	assert.True(t, Range(6, 3).IsEmpty())
	assert.Equal(t, "0-1", Range(-5, 1).String())
	assert.True(t, reflect.DeepEqual(CPUSet{}, New()))
}

func TestText(t *testing.T) {
	type doc struct {
		CPUs CPUSet `yaml:"cpus"`
	}
	var d doc
	require.NoError(t, yaml.Unmarshal([]byte(`cpus: "0-3,8"`), &d))
	assert.Equal(t, []int{0, 1, 2, 3, 8}, d.CPUs.List())
	out, err := yaml.Marshal(d)
	require.NoError(t, err)
	assert.Equal(t, "cpus: 0-3,8\n", string(out))

	type sparse struct {
		CPUs CPUSet `yaml:"cpus,omitempty"`
	}
	out, err = yaml.Marshal(sparse{CPUs: New(1)})
	require.NoError(t, err)
	assert.Equal(t, "cpus: \"1\"\n", string(out), "omitempty keeps a non-empty set")
	out, err = yaml.Marshal(sparse{})
	require.NoError(t, err)
	assert.Equal(t, "{}\n", string(out))

	err = yaml.Unmarshal([]byte(`cpus: "0-x"`), &d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `bad token "0-x"`)
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", "0", "0-3,8,10-11", "3,2,1", "0-1", "63-64", "1-0", "a", "0,,1", "65535", "0-65535", "4-8,6-10\n",
		strings.Repeat("9", 1<<13), "0," + strings.Repeat("x", 1<<13)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		set, err := Parse(in)
		if err != nil {
			assert.Less(t, len(err.Error()), 4*quote.MaxError, "the error quotes bounded prefixes")
			return
		}
		canonical := set.String()
		again, err := Parse(canonical)
		require.NoError(t, err, "canonical form %q of %q does not parse", canonical, in)
		require.True(t, set.Equal(again), "round trip of %q through %q", in, canonical)
		require.True(t, reflect.DeepEqual(set, again), "representation of %q is not canonical", in)
		require.Equal(t, canonical, again.String())
		list := set.List()
		require.True(t, slices.IsSorted(list))
		require.Len(t, slices.Compact(slices.Clone(list)), len(list), "duplicates in %v", list)
		require.Equal(t, len(list), set.Size())
		for _, cpu := range list {
			require.True(t, set.Contains(cpu))
		}
		require.True(t, New(list...).Equal(set))
	})
}

func BenchmarkAlgebra256(b *testing.B) {
	a := Range(0, 255)
	c := New(0, 2, 4, 6, 128, 250)
	for b.Loop() {
		_ = a.Difference(c).Union(c).Intersection(a).Size()
	}
}
