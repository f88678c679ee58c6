package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    float64
		wantErr string
	}{
		{in: "500m", want: 0.5},
		{in: "2", want: 2},
		{in: "1Ki", want: 1024},
		{in: "1E", want: 1e18}, // exa, not an exponent
		{in: "1e3", want: 1000},
		{in: "15e-1", want: 1.5},
		{in: "1e80000018", wantErr: "exponent 80000018 has more than 2 digits"},
		{in: "1e-80000018", wantErr: "exponent 80000018 has more than 2 digits"},
		{in: "1E+100", wantErr: "exponent 100 has more than 2 digits"},
		{in: "two", wantErr: "quantities must match"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			q, err := ParseQuantity(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, q.AsApproximateFloat64())
		})
	}
}
