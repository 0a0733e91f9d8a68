/* What a build without MPI or without NCCL answers (meson options mpi, nccl). */
#include "parallel/dist-impl.h"

#ifndef TG_HAVE_MPI
bool tg_have_mpi(void) { return false; }
tg_status tgd_mpi_init(int *argc, char ***argv, tg_dist *d) {
    (void)argc, (void)argv, (void)d;
    return tg_error_set(TG_ERR_UNSUPPORTED, "tgraph was built without MPI (meson option mpi; Debian: libopenmpi-dev)");
}
#endif

#ifndef TG_HAVE_NCCL
bool tg_have_nccl(void) { return false; }
bool tg_dist_can_use_nccl(const tg_backend *be) {
    (void)be;
    return false;
}
tg_status tgd_nccl_init(tg_dist *d, tg_backend *be) {
    (void)d, (void)be;
    return tg_error_set(TG_ERR_UNSUPPORTED, "tgraph was built without NCCL (meson option nccl; needs CUDA and MPI)");
}
#endif
