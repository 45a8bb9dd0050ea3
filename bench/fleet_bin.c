/* SPDX-License-Identifier: Apache-2.0 */
/* bench/fleet: see fleet.c. usage: fleet [--short] [options]   (root; SPACE_AGENT_PATH and friends name the helpers) */
#include <stdlib.h>

#include "fleet.h"

int main(int argc, char **argv)
{
	return fleet_main(argc, argv, NULL, getenv("SPACE_CLI"));
}
