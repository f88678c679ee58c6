package k8s

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/quote"
)

// maxExponentDigits bounds the decimal exponent of a quantity ("1e80000018"):
// apimachinery parses it without complaint but then takes half a minute to
// compare or convert it, which would stall an NRI handler past its timeout.
// Two digits cover every quantity an int64 can hold.
const maxExponentDigits = 2

// ParseQuantity parses a Kubernetes quantity ("500m", "2", "1Gi", "1e3") as
// resource.ParseQuantity does, but refuses decimal exponents of more than
// two digits, which no valid CPU or memory amount needs.
func ParseQuantity(s string) (resource.Quantity, error) {
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		if exp := strings.TrimLeft(s[i+1:], "+-"); len(exp) > maxExponentDigits {
			return resource.Quantity{}, fmt.Errorf("quantity %s: exponent %s has more than %d digits", quote.Value(s), quote.Bare(exp), maxExponentDigits)
		}
	}
	return resource.ParseQuantity(s)
}
