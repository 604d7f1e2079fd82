//go:build amd64 && !purego

package xxh32

func init() {
	if xxUseAVX {
		xxAsm = func(on bool) { xxUseAVX = on }
	}
}
