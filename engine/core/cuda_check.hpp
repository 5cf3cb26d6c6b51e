#pragma once
// Check macros for the CUDA runtime, cuBLAS and cuDNN: they keep the failed
// statement, file and line, and raise through tandem's one error sink (error.hpp),
// which the Lua boundary turns into a Lua error (DESIGN.md habit 4).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "engine/core/error.hpp"

#define TANDEM_CUDA_CHECK(stmt)                                                                                   \
  do {                                                                                                            \
    const cudaError_t tandem_err_ = (stmt);                                                                       \
    if (tandem_err_ != cudaSuccess)                                                                               \
      ::tandem::fail(::tandem::detail::concat(#stmt, " failed: ", cudaGetErrorName(tandem_err_), ": ",             \
                                              cudaGetErrorString(tandem_err_),                                    \
                                              " (a GPU fault or out of memory; run with CUDA_LAUNCH_BLOCKING=1 to " \
                                              "find the op)"),                                                    \
                     __FILE__, __LINE__);                                                                         \
  } while (0)

#define TANDEM_CUBLAS_CHECK(stmt)                                                                          \
  do {                                                                                                     \
    const cublasStatus_t tandem_st_ = (stmt);                                                              \
    if (tandem_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      ::tandem::fail(::tandem::detail::concat(#stmt, " failed: ", cublasGetStatusName(tandem_st_), ": ",    \
                                              cublasGetStatusString(tandem_st_)),                          \
                     __FILE__, __LINE__);                                                                  \
  } while (0)

#define TANDEM_CUDNN_CHECK(stmt)                                                                                   \
  do {                                                                                                             \
    const cudnnStatus_t tandem_st_ = (stmt);                                                                       \
    if (tandem_st_ != CUDNN_STATUS_SUCCESS) {                                                                      \
      char tandem_msg_[512] = {0};                                                                                 \
      cudnnGetLastErrorString(tandem_msg_, sizeof tandem_msg_);                                                    \
      ::tandem::fail(::tandem::detail::concat(#stmt, " failed: ", cudnnGetErrorString(tandem_st_), " ", tandem_msg_), \
                     __FILE__, __LINE__);                                                                          \
    }                                                                                                              \
  } while (0)
