# The default build needs no GPU and no cgo toolchain beyond the machine's;
# `make cuda` builds the GPU flavour into bin/cuda (see scripts/cuda).

.PHONY: test cuda

test:
	go vet ./...
	go test ./...

cuda:
	scripts/cuda/build.sh bin/cuda
