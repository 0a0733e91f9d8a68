/* `tg train` under an MPI launcher (mpirun -np N tg train ...): joining the group, and the
 * pieces of a run that only rank 0 can see (the files of a resumed run) handed to every rank.
 * docs/distributed.md says how to launch and what to expect. */
#ifndef TG_TOOLS_TRAIN_GROUP_H
#define TG_TOOLS_TRAIN_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "tg/dist.h"

/* The group this process belongs to: NULL when it was not launched as one of several ranks.
 * Fails (message printed) when launched as several ranks by a tg built without MPI — each would
 * otherwise train alone and overwrite the others' files. */
int tg_train_group_join(const char *cmd, tg_dist **out);

/* Resuming in a group: rank 0 reads DIR's model and state files and sends their bytes to every
 * rank; the others write them into a private temporary directory (so hosts without a shared
 * file system resume too) and get its paths in model_path / state_path (n bytes each). *tmpdir
 * receives that directory (to remove with tg_train_group_cleanup), "" on rank 0. (collective) */
tg_status tg_train_group_share_files(tg_dist *d, char *model_path, char *state_path, size_t n, char *tmpdir,
                                     size_t tmpdir_n);
void tg_train_group_cleanup(const char *tmpdir);

/* TG_ERR_INVALID on every rank unless every rank passed the same value (a fingerprint of the
 * data or the options): ranks given different data would otherwise train on different batches
 * without notice. `what` names the value in the message. (collective) */
tg_status tg_train_group_same(tg_dist *d, uint64_t value, const char *what);

/* CPU threads per rank when --threads is 0 and TG_NUM_THREADS is unset: the cores of the host
 * shared by its ranks (at least 1), so that N ranks on one host do not oversubscribe it. */
int tg_train_group_threads(const tg_dist *d);

#endif
