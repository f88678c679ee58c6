package runtime

import (
	"testing"

	"github.com/sirupsen/logrus"
)

// BenchmarkCleanStateToRunningContainer measures a whole node cycle: start
// the runtime and the kubelet, run one static pod until its container runs,
// tear everything down.
func BenchmarkCleanStateToRunningContainer(b *testing.B) {
	for _, rt := range RuntimeNames() {
		b.Run(rt, func(b *testing.B) {
			RequirePrereqs(b, rt)
			log := logrus.New()
			log.SetLevel(logrus.WarnLevel)
			for b.Loop() {
				ctx := TestContext(b)
				sb, err := Start(ctx, Options{Runtime: rt, Log: log, TolerateMissingPlugins: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.WritePod(BusyboxPod("bench")); err != nil {
					b.Fatal(err)
				}
				_, err = sb.WaitContainer(ctx, "bench", "main")
				if closeErr := sb.Close(); closeErr != nil {
					b.Fatal(closeErr)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
