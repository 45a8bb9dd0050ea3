/* SPDX-License-Identifier: Apache-2.0 */
/* The image's tree as a tar stream (unpack.h). */
#include <errno.h>

#include "unpack/unpack.h"
#include "util/util.h"

int export_tar(ext2_filsys fs, int out_fd, char *err, size_t errlen)
{
	(void)fs;
	(void)out_fd;
	return util_errf(err, errlen, -EOPNOTSUPP, "not yet");
}
