//go:build amd64 && !purego

package checksum

func init() {
	if adlerUseAVX2 {
		adlerAsm = func(on bool) { adlerUseAVX2 = on }
	}
}
