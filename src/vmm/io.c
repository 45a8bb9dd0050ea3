/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Port I/O and MMIO exits: the platform's port map (8250, i8042, ACPI sleep/reset registers, the debug
 * exit port) and dispatch of MMIO windows to device models. Reads nobody answers return all ones,
 * like an empty bus.
 */
#include <string.h>

#include "vmm/vm_priv.h"

#define SLP_TYP_SHIFT 2
#define SLP_TYP_MASK  0x1c
#define SLP_EN        0x20

static void port_write(struct vm *vm, uint16_t port, uint8_t v)
{
	if (port == VM_PORT_DEBUG_EXIT) {
		if (v == 0)
			vm_stop(vm, VM_EXIT_POWEROFF, 0, "guest requested exit through the debug port");
		else
			vm_stop(vm, VM_EXIT_GUEST_FAILURE, v, "guest reported failure (code %u)", v);
	} else if (port == VM_PORT_SLEEP_CTL) {
		if ((v & SLP_EN) && ((v & SLP_TYP_MASK) >> SLP_TYP_SHIFT) == VM_ACPI_S5_TYPE)
			vm_stop(vm, VM_EXIT_POWEROFF, 0, "guest powered off (ACPI S5)");
	} else if (port == VM_PORT_RESET) {
		if (v == VM_RESET_VALUE)
			vm_stop(vm, VM_EXIT_RESET, 0, "guest requested a reset (ACPI reset register)");
	}
}

static void port_io(struct vm *vm, uint16_t port, bool is_write, uint8_t *data)
{
	if (port >= SERIAL_COM1_BASE && port < SERIAL_COM1_BASE + 8) {
		serial_io(vm->serial, port - SERIAL_COM1_BASE, is_write, data);
	} else if (port == I8042_DATA_PORT || port == I8042_CMD_PORT || port == I8042_PORT_B) {
		if (i8042_io(vm->i8042, port, is_write, data))
			vm_stop(vm, VM_EXIT_RESET, 0, "guest requested a reset (i8042)");
	} else if (is_write) {
		port_write(vm, port, *data);
	} else {
		*data = port == VM_PORT_SLEEP_STS ? 0 : 0xff;
	}
}

void vm_handle_io(struct vm *vm, struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint64_t bytes = (uint64_t)run->io.size * run->io.count;
	if (run->io.data_offset + bytes > vm->run_size) {
		vm_stop(vm, VM_EXIT_INTERNAL, 0, "port I/O exit with data outside the run area");
		return;
	}
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool is_write = run->io.direction == KVM_EXIT_IO_OUT;
	/* Every device here is byte-wide: wider accesses are split into consecutive ports. */
	for (uint32_t i = 0; i < run->io.count; i++)
		for (unsigned b = 0; b < run->io.size; b++)
			port_io(vm, (uint16_t)(run->io.port + b), is_write, data + i * run->io.size + b);
}

void vm_handle_mmio(struct vm *vm, struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint64_t addr = run->mmio.phys_addr;
	unsigned len = run->mmio.len;
	if (len == 0 || len > 8)
		return;
	for (unsigned i = 0; i < vm->nmmio; i++) {
		struct mmio_dev *d = &vm->mmio[i].dev;
		if (addr >= d->base && addr - d->base < d->size && len <= d->size - (addr - d->base)) {
			if (run->mmio.is_write)
				d->ops->write(d->dev, addr - d->base, run->mmio.data, len);
			else
				d->ops->read(d->dev, addr - d->base, run->mmio.data, len);
			return;
		}
	}
	if (!run->mmio.is_write)
		memset(run->mmio.data, 0xff, len);
}
