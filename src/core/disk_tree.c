/* SPDX-License-Identifier: Apache-2.0 */
/* Jail disks as directory trees (core/disk_tree.h). */
#include "core/disk_tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/unpack.h"
#include "store/btrfs.h"
#include "store/db.h"
#include "util/cleanup.h"

bool disk_tree_pool_ready(space_ctx *ctx, const char *root)
{
	int mode = store_btrfs_quota_mode(root);
	if (mode != STORE_QUOTA_NONE)
		return mode > 0;
	/* Our own loop pool: turn simple quotas on (once; it stays on). */
	_cleanup_free_ char *loop = NULL;
	if (!ctx->store || store_meta_get(ctx->store, "loop_image", &loop) < 0 || !loop || !loop[0])
		return false;
	int r = store_btrfs_squota_enable(root);
	if (r < 0) {
		ctx_log(ctx, SPACE_LOG_INFO, "btrfs simple quotas cannot be turned on in pool %s (%s): jail disks stay "
					     "ext4 images", root, strerror(-r));
		return false;
	}
	ctx_log(ctx, SPACE_LOG_INFO, "btrfs simple quotas turned on in pool %s: jail disks are directory trees", root);
	return store_btrfs_quota_mode(root) > 0;
}

int disk_tree_add(space_ctx *ctx, const char *root, const char *subvol, space_progress_fn progress,
		  void *progress_userdata)
{
	if (!disk_tree_pool_ready(ctx, root))
		return 0;
	char image[PATH_MAX], tree[PATH_MAX];
	snprintf(image, sizeof(image), "%s/rootfs.ext4", subvol);
	snprintf(tree, sizeof(tree), "%s/" DISK_TREE, subvol);
	return unpack_tree_from_image(ctx, image, tree, progress, progress_userdata);
}

int disk_tree_of(const char *subvol, char *buf, size_t len)
{
	struct stat st;
	if ((size_t)snprintf(buf, len, "%s/" DISK_TREE, subvol) >= len)
		return -ENAMETOOLONG;
	if (lstat(buf, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return S_ISDIR(st.st_mode) ? 1 : 0;
}

int disk_tree_reinstate(const char *subvol)
{
	char tree[PATH_MAX], stale[PATH_MAX];
	struct stat st;
	snprintf(stale, sizeof(stale), "%s/" DISK_TREE_STALE, subvol);
	if (disk_tree_of(subvol, tree, sizeof(tree)) != 0 || lstat(stale, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	return rename(stale, tree) < 0 ? -errno : 0;
}

void disk_tree_retire(space_ctx *ctx, const char *subvol)
{
	char tree[PATH_MAX], stale[PATH_MAX];
	if (disk_tree_of(subvol, tree, sizeof(tree)) <= 0)
		return;
	snprintf(stale, sizeof(stale), "%s/" DISK_TREE_STALE, subvol);
	if (rename(tree, stale) < 0)
		ctx_log(ctx, SPACE_LOG_WARNING, "move %s aside: %s", tree, strerror(errno));
}
