/* One kernel of each of the library's device modules (each .cu file in kernels/ is
 * a module of its own: no relocatable device code), by which preload.c
 * finds the module to load whole when a device is opened. A new .cu file
 * adds its function here and in preload.c's list. */
#ifndef VC_CUDA_MODULES_H
#define VC_CUDA_MODULES_H

#ifdef __cplusplus
extern "C" {
#endif

const void *vc_cuda_cmp_module(void);
const void *vc_cuda_fault_module(void);
const void *vc_cuda_fp_module(void);
const void *vc_cuda_gc_module(void);
const void *vc_cuda_gfs_module(void);
const void *vc_cuda_move_module(void);
const void *vc_cuda_server_module(void);
const void *vc_cuda_xts_module(void);

#ifdef __cplusplus
}
#endif
#endif
