// cuBLAS, loaded when first called (CUDA builds only). Linking libcublas
// makes every oar process — pservers and CPU trainers included — load
// libcublasLt at start, whose static setup alone holds ~150 MB of resident
// memory. So the binary is not linked against cuBLAS; it defines the
// handful of cuBLAS entry points Oar calls (their declarations come from
// cublas_v2.h, so the signatures cannot drift), and each forwards to the
// library's own function, which the first call dlopens. A process that
// never computes on a GPU never loads it.
//
// Without the library (an image that lacks it) a call fails with
// CUBLAS_STATUS_NOT_INITIALIZED, and the status texts name the library and
// dlerror's reason, so the op's error says what is missing; a function the
// library lacks is logged by name.
//
// Thread-safety: the library is opened once (a function-local static);
// each entry point resolves its function once, likewise.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "glog/logging.h"

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;  // why it did not load
};

// Never destroyed: a cuBLAS call may come during static destruction.
const Library& Cublas() {
  static const Library* lib = [] {
    auto* l = new Library;
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    l->handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (l->handle == nullptr) {
      const char* why = dlerror();
      l->error = "cuBLAS (" + name + ") cannot be loaded: " + (why != nullptr ? why : "unknown reason");
    }
    return l;
  }();
  return *lib;
}

// The library's `name`, of type F; null when it or the library is missing.
template <typename F>
F Resolve(const char* name) {
  const Library& lib = Cublas();
  if (lib.handle == nullptr) return nullptr;
  auto fn = reinterpret_cast<F>(dlsym(lib.handle, name));
  if (fn == nullptr)
    LOG(ERROR) << "libcublas.so." << CUBLAS_VER_MAJOR << " has no " << name << " (another cuBLAS version?)";
  return fn;
}

}  // namespace

// Each forwards to the library's definition of the same name.
#define OAR_CUBLAS_FORWARD(name, params, args)                      \
  extern "C" cublasStatus_t CUBLASWINAPI name params {              \
    static const auto fn = Resolve<decltype(&name)>(#name);         \
    return fn == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : fn args; \
  }

OAR_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
OAR_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
OAR_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
OAR_CUBLAS_FORWARD(cublasSgemm_v2,
                   (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                    int ldc),
                   (handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
OAR_CUBLAS_FORWARD(cublasSgemmStridedBatched,
                   (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float* alpha, const float* a, int lda, long long int stride_a, const float* b, int ldb,
                    long long int stride_b, const float* beta, float* c, int ldc, long long int stride_c, int batch),
                   (handle, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch))

#undef OAR_CUBLAS_FORWARD

extern "C" const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto fn = Resolve<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  return fn != nullptr ? fn(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

extern "C" const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto fn = Resolve<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  if (fn != nullptr) return fn(status);
  const std::string& why = Cublas().error;
  return why.empty() ? "this cuBLAS lacks a function Oar calls" : why.c_str();
}
