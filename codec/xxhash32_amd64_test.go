//go:build amd64 && !purego

package codec

func init() {
	if xxUseSSE41 {
		xxAsm = func(on bool) { xxUseSSE41 = on }
	}
}
