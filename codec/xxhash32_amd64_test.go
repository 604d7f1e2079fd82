//go:build amd64 && !purego && !clib

package codec

func init() {
	if xxUseAVX {
		xxAsm = func(on bool) { xxUseAVX = on }
	}
}
