//go:build amd64 && !purego

package codec

func init() {
	if xxUseAVX {
		xxAsm = func(on bool) { xxUseAVX = on }
	}
}
