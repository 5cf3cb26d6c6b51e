# Whether the engine gets its CUDA backend (TANDEM_HAVE_CUDA), and, where it does
# not but a CUDA toolkit is installed, whether the CUDA sources are still compiled
# as a check (TANDEM_CUDA_CHECK; cmake/cuda_kernels.cmake).
#
# TANDEM_WITH_CUDA:
#   AUTO (default): the backend where this machine shows a GPU (nvidia-smi -L) or the
#        configure names architectures (-DCMAKE_CUDA_ARCHITECTURES=90 for the H100 and
#        H200 kits); otherwise a CPU-only engine, and with a toolkit the check.
#   ON:  the backend wherever the toolkit, cuDNN and NCCL are found (a GPU-less build
#        machine preparing binaries for GPU ones).
#   OFF: neither.
# Why not always the backend: on a machine without a GPU its kernels never run, yet
# nvcc's detection at configure and the kernels' compile cost a new user's first
# build a fifth of its time (`make quickstart` on 2 cores; docs/testing.md). The
# check keeps what the issue asks of CI: a kernel or CUDA host file that no longer
# compiles fails `make test`'s build.
# A build folder from before AUTO holds the old option(), a BOOL whose default was ON:
# it becomes AUTO (OFF stays OFF).
set(TANDEM_WITH_CUDA_DOC "CUDA backend: AUTO (where a GPU is visible or CMAKE_CUDA_ARCHITECTURES is set), ON or OFF")
get_property(TANDEM_WITH_CUDA_TYPE CACHE TANDEM_WITH_CUDA PROPERTY TYPE)
if(TANDEM_WITH_CUDA_TYPE STREQUAL "BOOL")
  if(TANDEM_WITH_CUDA)
    set(TANDEM_WITH_CUDA AUTO CACHE STRING "${TANDEM_WITH_CUDA_DOC}" FORCE)
  else()
    set(TANDEM_WITH_CUDA OFF CACHE STRING "${TANDEM_WITH_CUDA_DOC}" FORCE)
  endif()
endif()
set(TANDEM_WITH_CUDA AUTO CACHE STRING "${TANDEM_WITH_CUDA_DOC}")
set_property(CACHE TANDEM_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TANDEM_WITH_CUDA}" TANDEM_WITH_CUDA_MODE)
if(TANDEM_WITH_CUDA_MODE MATCHES "^(1|Y|YES|TRUE)$")
  set(TANDEM_WITH_CUDA_MODE ON)
elseif(TANDEM_WITH_CUDA_MODE MATCHES "^(0|N|NO|FALSE)$")
  set(TANDEM_WITH_CUDA_MODE OFF)
endif()
if(NOT TANDEM_WITH_CUDA_MODE MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TANDEM_WITH_CUDA is '${TANDEM_WITH_CUDA}': give AUTO, ON or OFF")
endif()

set(TANDEM_HAVE_CUDA OFF)
set(TANDEM_CUDA_CHECK OFF)
set(TANDEM_CUDA_WHY "TANDEM_WITH_CUDA=OFF")
if(NOT TANDEM_WITH_CUDA_MODE STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(CMAKE_CUDA_COMPILER AND IS_ABSOLUTE "${CMAKE_CUDA_COMPILER}")
    get_filename_component(TANDEM_NVCC_REAL "${CMAKE_CUDA_COMPILER}" REALPATH)
    get_filename_component(CUDAToolkit_ROOT "${TANDEM_NVCC_REAL}/../.." ABSOLUTE)
  endif()
  # CMake reads CUDAARCHS only in enable_language(CUDA): read here, it chooses the
  # backend as -DCMAKE_CUDA_ARCHITECTURES does.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT "$ENV{CUDAARCHS}" STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}" CACHE STRING "CUDA architectures (from CUDAARCHS)")
  endif()
  find_package(CUDAToolkit QUIET)
  set(TANDEM_CUDA_WHY "no CUDA toolkit found (nvcc)")
  if(CUDAToolkit_FOUND AND NOT CUDAToolkit_NVCC_EXECUTABLE)
    set(TANDEM_CUDA_WHY "a CUDA toolkit without nvcc at ${CUDAToolkit_BIN_DIR}")
  elseif(CUDAToolkit_FOUND)
    # cuDNN (convolution, pooling) and NCCL (collectives) ship beside the toolkit on
    # these machines; the CUDA backend needs both, or it stays off with a reason.
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(NOT (CUDNN_LIBRARY AND CUDNN_INCLUDE_DIR AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR))
      set(TANDEM_CUDA_WHY "CUDA found but cuDNN (${CUDNN_LIBRARY}) or NCCL (${NCCL_LIBRARY}) missing; the CUDA backend needs both")
    else()
      execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE TANDEM_NVIDIA_SMI_RC
                      OUTPUT_VARIABLE TANDEM_GPUS ERROR_QUIET)
      set(TANDEM_GPU_VISIBLE OFF)
      if(TANDEM_NVIDIA_SMI_RC EQUAL 0 AND TANDEM_GPUS MATCHES "GPU 0")
        set(TANDEM_GPU_VISIBLE ON)
      endif()
      if(TANDEM_WITH_CUDA_MODE STREQUAL "ON" OR TANDEM_GPU_VISIBLE OR DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(TANDEM_HAVE_CUDA ON)
        # Unless the user chose: the GPUs of this machine where it has any, else one
        # virtual architecture, PTX that the driver compiles for any GPU since Ampere.
        if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
          if(TANDEM_GPU_VISIBLE)
            set(CMAKE_CUDA_ARCHITECTURES native)
          else()
            set(CMAKE_CUDA_ARCHITECTURES 80-virtual)
          endif()
        endif()
        enable_language(CUDA)
      else()
        set(TANDEM_CUDA_CHECK ON)
        set(TANDEM_CUDA_WHY "no GPU visible (nvidia-smi -L): the CUDA sources compile as a check only; -DTANDEM_WITH_CUDA=ON or -DCMAKE_CUDA_ARCHITECTURES=... builds the backend")
      endif()
    endif()
  endif()
endif()
if(TANDEM_HAVE_CUDA)
  message(STATUS "tandem: CUDA ${CUDAToolkit_VERSION} for architectures ${CMAKE_CUDA_ARCHITECTURES}, MPI ${MPI_C_FOUND}")
else()
  message(STATUS "tandem: CUDA backend OFF (${TANDEM_CUDA_WHY}), MPI ${MPI_C_FOUND}")
endif()
