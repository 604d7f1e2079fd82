# Sourced by the cuda build: points cgo at the CUDA header and link stub
# that fetch-headers.sh leaves in $CUDA_SDK (default bin/cuda-sdk).
CUDA_SDK=${CUDA_SDK:-$(pwd)/bin/cuda-sdk}
export CGO_ENABLED=1
export CGO_CFLAGS="-I$CUDA_SDK/include -Wno-deprecated-declarations"
export CGO_LDFLAGS="-L$CUDA_SDK/lib"
