/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prints, as JSON, the layout the C compiler gives every struct of include/space.h that the Python
 * binding declares (sizeof, and each field's offset and size), and the version numbers and flags it
 * hard-codes. tests/python/test_layout.py compares them with the binding's ctypes structs, so a field
 * added to space.h, or a layout the binding got wrong, fails a test instead of corrupting memory.
 */
#include <space.h>
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size)
{
	printf("%s\n    \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "" : ",", name, size);
	first_struct = 0;
	first_field = 1;
}

static void member(const char *name, size_t offset, size_t size)
{
	printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
	first_field = 0;
}

static void end(void) { printf("}}"); }

#define S(type) begin(#type, sizeof(struct type))
#define F(type, f) member(#f, offsetof(struct type, f), sizeof(((struct type *)0)->f))

int main(void)
{
	printf("{\"structs\": {");
	S(space_ctx_options);
	F(space_ctx_options, version); F(space_ctx_options, state_dir); F(space_ctx_options, log);
	F(space_ctx_options, log_userdata); F(space_ctx_options, log_level); F(space_ctx_options, libexec_dir);
	end();
	S(space_init_options);
	F(space_init_options, version); F(space_init_options, pool_path); F(space_init_options, loop_pool_size);
	F(space_init_options, isolation); F(space_init_options, progress); F(space_init_options, progress_userdata);
	F(space_init_options, identity_map);
	end();
	S(space_pool_info);
	F(space_pool_info, size); F(space_pool_info, path); F(space_pool_info, loop_image);
	F(space_pool_info, isolation); F(space_pool_info, total_bytes); F(space_pool_info, free_bytes);
	F(space_pool_info, mounted); F(space_pool_info, used_bytes); F(space_pool_info, promised_bytes);
	F(space_pool_info, sandbox_disks);
	end();
	S(space_template_import_options);
	F(space_template_import_options, version); F(space_template_import_options, name);
	F(space_template_import_options, rootfs); F(space_template_import_options, kernel);
	F(space_template_import_options, initrd); F(space_template_import_options, size_bytes);
	F(space_template_import_options, progress); F(space_template_import_options, progress_userdata);
	F(space_template_import_options, modules_dir); F(space_template_import_options, image);
	F(space_template_import_options, force);
	end();
	S(space_template_info);
	F(space_template_info, size); F(space_template_info, name); F(space_template_info, path);
	F(space_template_info, rootfs_bytes); F(space_template_info, has_kernel); F(space_template_info, has_initrd);
	F(space_template_info, created_ms); F(space_template_info, sandboxes); F(space_template_info, checkpoints);
	F(space_template_info, image_digest); F(space_template_info, image_config); F(space_template_info, id);
	end();
	S(space_template_warm_info);
	F(space_template_warm_info, size); F(space_template_warm_info, has_snapshot);
	F(space_template_warm_info, snapshot_cpus); F(space_template_warm_info, snapshot_memory_mib);
	F(space_template_warm_info, snapshot_created_ms); F(space_template_warm_info, warm_pool_size);
	F(space_template_warm_info, warm_pool_ready);
	end();
	S(space_sandbox_info);
	F(space_sandbox_info, size); F(space_sandbox_info, id); F(space_sandbox_info, template_name);
	F(space_sandbox_info, isolation); F(space_sandbox_info, status); F(space_sandbox_info, reason);
	F(space_sandbox_info, pid); F(space_sandbox_info, cpus); F(space_sandbox_info, memory_mib);
	F(space_sandbox_info, created_ms); F(space_sandbox_info, updated_ms); F(space_sandbox_info, expires_ms);
	F(space_sandbox_info, path);
	end();
	S(space_sandbox_options);
	F(space_sandbox_options, version); F(space_sandbox_options, template_name); F(space_sandbox_options, isolation);
	F(space_sandbox_options, cpus); F(space_sandbox_options, memory_mib); F(space_sandbox_options, timeout_s);
	F(space_sandbox_options, hostname); F(space_sandbox_options, env); F(space_sandbox_options, network_policy);
	F(space_sandbox_options, snapshot_every_s); F(space_sandbox_options, snapshot_keep);
	F(space_sandbox_options, network_policy_trusted); F(space_sandbox_options, network_allow_resolve);
	end();
	S(space_exec_options);
	F(space_exec_options, version); F(space_exec_options, argv); F(space_exec_options, env);
	F(space_exec_options, cwd); F(space_exec_options, uid); F(space_exec_options, gid); F(space_exec_options, pty);
	F(space_exec_options, rows); F(space_exec_options, cols); F(space_exec_options, timeout_ms);
	F(space_exec_options, stdin_fd); F(space_exec_options, output); F(space_exec_options, userdata);
	F(space_exec_options, flags);
	end();
	S(space_exec_result);
	F(space_exec_result, size); F(space_exec_result, exited); F(space_exec_result, exit_code);
	F(space_exec_result, signal); F(space_exec_result, timed_out); F(space_exec_result, oom_killed);
	end();
	S(space_file_stat);
	F(space_file_stat, size); F(space_file_stat, mode); F(space_file_stat, uid); F(space_file_stat, gid);
	F(space_file_stat, file_size); F(space_file_stat, mtime_ns);
	end();
	S(space_sandbox_usage);
	F(space_sandbox_usage, size); F(space_sandbox_usage, cpus); F(space_sandbox_usage, cpu_ns);
	F(space_sandbox_usage, memory_bytes); F(space_sandbox_usage, memory_cache_bytes);
	F(space_sandbox_usage, memory_limit_bytes); F(space_sandbox_usage, disk_used_bytes);
	F(space_sandbox_usage, disk_total_bytes); F(space_sandbox_usage, time_ms);
	end();
	S(space_read_options);
	F(space_read_options, version); F(space_read_options, max_bytes); F(space_read_options, progress);
	F(space_read_options, progress_userdata);
	end();
	S(space_checkpoint_info);
	F(space_checkpoint_info, size); F(space_checkpoint_info, id); F(space_checkpoint_info, sandbox_id);
	F(space_checkpoint_info, template_name); F(space_checkpoint_info, name); F(space_checkpoint_info, kind);
	F(space_checkpoint_info, path); F(space_checkpoint_info, created_ms);
	end();
	S(space_checkpoint_fork_options);
	F(space_checkpoint_fork_options, version); F(space_checkpoint_fork_options, count);
	F(space_checkpoint_fork_options, timeout_s);
	end();
	S(space_secret_info);
	F(space_secret_info, size); F(space_secret_info, name); F(space_secret_info, created_ms);
	end();
	S(space_event);
	F(space_event, size); F(space_event, seq); F(space_event, ts_ms); F(space_event, sandbox_id);
	F(space_event, kind); F(space_event, detail);
	end();
	S(space_event_query);
	F(space_event_query, version); F(space_event_query, sandbox_id); F(space_event_query, kind);
	F(space_event_query, after_seq); F(space_event_query, limit);
	end();
	printf("\n  },\n  \"constants\": {\n");
#define C(name, value) printf("    \"%s\": %lld,\n", name, (long long)(value))
	C("CTX_OPTIONS_VERSION", SPACE_CTX_OPTIONS_VERSION);
	C("INIT_OPTIONS_VERSION", SPACE_INIT_OPTIONS_VERSION);
	C("TEMPLATE_IMPORT_OPTIONS_VERSION", SPACE_TEMPLATE_IMPORT_OPTIONS_VERSION);
	C("SANDBOX_OPTIONS_VERSION", SPACE_SANDBOX_OPTIONS_VERSION);
	C("EXEC_OPTIONS_VERSION", SPACE_EXEC_OPTIONS_VERSION);
	C("READ_OPTIONS_VERSION", SPACE_READ_OPTIONS_VERSION);
	C("CHECKPOINT_FORK_OPTIONS_VERSION", SPACE_CHECKPOINT_FORK_OPTIONS_VERSION);
	C("EVENT_QUERY_VERSION", SPACE_EVENT_QUERY_VERSION);
	C("LOG_ERROR", SPACE_LOG_ERROR);
	C("LOG_WARNING", SPACE_LOG_WARNING);
	C("LOG_INFO", SPACE_LOG_INFO);
	C("LOG_DEBUG", SPACE_LOG_DEBUG);
	C("IDENTITY_MAP_ALLOW", SPACE_IDENTITY_MAP_ALLOW);
	C("IDENTITY_MAP_REFUSE", SPACE_IDENTITY_MAP_REFUSE);
	C("DOCTOR_VERBOSE", SPACE_DOCTOR_VERBOSE);
	C("EXEC_STDIN", SPACE_EXEC_STDIN);
	C("EXEC_USER", SPACE_EXEC_USER);
	C("STEP_CHECKPOINT_FIRST", SPACE_STEP_CHECKPOINT_FIRST);
	C("REMOVE_KEEP_EVENTS", SPACE_REMOVE_KEEP_EVENTS);
	C("REMOVE_WITH_CHECKPOINTS", SPACE_REMOVE_WITH_CHECKPOINTS);
	C("CHECKPOINT_ID_MAX", SPACE_CHECKPOINT_ID_MAX);
	C("TIMEOUT_MAX_S", SPACE_TIMEOUT_MAX_S);
	C("READ_MAX_DEFAULT", SPACE_READ_MAX_DEFAULT);
	C("SECRET_VALUE_MAX", SPACE_SECRET_VALUE_MAX);
	C("SANDBOX_CREATING", SPACE_SANDBOX_CREATING);
	C("SANDBOX_DESTROYED", SPACE_SANDBOX_DESTROYED);
	printf("    \"SIZEOF_BOOL\": %zu\n  }\n}\n", sizeof(bool));
	return 0;
}
