#!/usr/bin/env python3
# Builds container images by hand for the image tests: layer tars and the JSON documents of an OCI image
# layout (a directory or a tar of one) or of a `docker save` archive (legacy layout, or Docker 25's OCI
# layout plus manifest.json with legacy names as symlinks), exactly as the formats say and with no tool
# but Python's tarfile, gzip and hashlib. No registry, no docker.
#
#   mkimage.py RECIPE OUT [--format oci-dir|oci-tar|docker-legacy|docker-oci] [--busybox PATH]
#
# Recipes: three-layer (whiteouts, an opaque directory, a hard link across layers, Env/WorkingDir/User,
# Entrypoint/Cmd, a gzip, a zstd and a plain layer), hostile-NAME (one attack each: abs, dotdot,
# symlink-escape, device, setuid, hardlink-escape, digest, platform, index-multi), noshell, big (bench: about
# SIZE_MB of data over three layers). Layers start from a busybox tree (the tests need /bin/sh).
import argparse
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tarfile

MTIME = 1700000000


def ti(name, typ=tarfile.REGTYPE, mode=0o644, uid=0, gid=0, link='', data=None, pax=None, dev=(0, 0)):
    return dict(name=name, typ=typ, mode=mode, uid=uid, gid=gid, link=link, data=data, pax=pax, dev=dev)


def dir_(name, mode=0o755, **kw):
    return ti(name, tarfile.DIRTYPE, mode, **kw)


def file_(name, data, mode=0o644, **kw):
    return ti(name, data=data if isinstance(data, bytes) else data.encode(), mode=mode, **kw)


def layer_tar(entries, fmt=tarfile.PAX_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode='w', format=fmt) as t:
        for e in entries:
            h = tarfile.TarInfo(e['name'])
            h.type, h.mode, h.uid, h.gid, h.mtime = e['typ'], e['mode'], e['uid'], e['gid'], MTIME
            h.linkname = e['link']
            h.devmajor, h.devminor = e['dev']
            if e['pax']:
                h.pax_headers = e['pax']
            if e['typ'] == tarfile.REGTYPE:
                h.size = len(e['data'])
                t.addfile(h, io.BytesIO(e['data']))
            else:
                t.addfile(h)
    return b.getvalue()


def busybox_entries(bb):
    """A busybox root file system: bin/busybox, its applets as symlinks, /etc/passwd with an app user."""
    data = open(bb, 'rb').read()
    out = [dir_('bin'), dir_('sbin'), dir_('etc'), dir_('tmp', 0o1777), dir_('root', 0o700), dir_('usr'),
           dir_('usr/bin'), dir_('proc'), dir_('sys'), dir_('dev'), dir_('run'),
           file_('bin/busybox', data, 0o755)]
    names = subprocess.run([bb, '--list-full'], capture_output=True, text=True, check=True).stdout.split()
    for n in names:
        if n != 'bin/busybox':
            out.append(ti(n, tarfile.SYMTYPE, 0o777, link='/bin/busybox'))
    out.append(file_('etc/passwd', 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n'
                     'nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n'))
    out.append(file_('etc/group', 'root:x:0:\napp:x:1000:\nstaff:x:50:\nnogroup:x:65534:\n'))
    out.append(dir_('home'))
    out.append(dir_('home/app', 0o755, uid=1000, gid=1000))
    return out


def sha(b):
    return 'sha256:' + hashlib.sha256(b).hexdigest()


def compress(raw, kind):
    if kind == 'gzip':
        return gzip.compress(raw, 6, mtime=0)
    if kind == 'zstd':
        return subprocess.run(['zstd', '-q', '-c', '-3'], input=raw, capture_output=True, check=True).stdout
    return raw


MT = {'gzip': 'application/vnd.oci.image.layer.v1.tar+gzip', 'zstd': 'application/vnd.oci.image.layer.v1.tar+zstd',
      'none': 'application/vnd.oci.image.layer.v1.tar'}


class Image:
    def __init__(self, layers, config, comps=None, platform=('linux', 'amd64')):
        self.raw = [layer_tar(l) if isinstance(l, list) else l for l in layers]
        self.comps = comps or ['gzip'] * len(self.raw)
        self.blobs = [compress(r, c) for r, c in zip(self.raw, self.comps)]
        self.config = dict(architecture=platform[1], os=platform[0], config=config,
                           rootfs=dict(type='layers', diff_ids=[sha(r) for r in self.raw]),
                           history=[dict(created='2023-11-14T22:13:20Z')] * len(self.raw))
        self.config_bytes = json.dumps(self.config, sort_keys=True).encode()
        self.manifest = dict(schemaVersion=2, mediaType='application/vnd.oci.image.manifest.v1+json',
                             config=dict(mediaType='application/vnd.oci.image.config.v1+json',
                                         digest=sha(self.config_bytes), size=len(self.config_bytes)),
                             layers=[dict(mediaType=MT[c], digest=sha(b), size=len(b))
                                     for b, c in zip(self.blobs, self.comps)])
        self.manifest_bytes = json.dumps(self.manifest).encode()

    def oci_files(self, index=None):
        files = {'oci-layout': json.dumps({'imageLayoutVersion': '1.0.0'}).encode()}
        for b in self.blobs + [self.config_bytes, self.manifest_bytes]:
            files['blobs/sha256/' + sha(b)[7:]] = b
        idx = index or dict(schemaVersion=2, mediaType='application/vnd.oci.image.index.v1+json',
                            manifests=[dict(mediaType='application/vnd.oci.image.manifest.v1+json',
                                            digest=sha(self.manifest_bytes), size=len(self.manifest_bytes),
                                            annotations={'org.opencontainers.image.ref.name': 'test:latest'},
                                            platform=dict(os='linux', architecture='amd64'))])
        files['index.json'] = json.dumps(idx).encode()
        return files

    def docker_legacy_files(self):
        files = {}
        cid = sha(self.config_bytes)[7:]
        files[cid + '.json'] = self.config_bytes
        names = []
        for i, raw in enumerate(self.raw):
            lid = hashlib.sha256(b'layer%d' % i + raw[:64]).hexdigest()
            files[lid + '/VERSION'] = b'1.0'
            files[lid + '/json'] = json.dumps({'id': lid}).encode()
            files[lid + '/layer.tar'] = raw  # docker save writes layers uncompressed
            names.append(lid + '/layer.tar')
        files['manifest.json'] = json.dumps([dict(Config=cid + '.json', RepoTags=['test:legacy'], Layers=names)]).encode()
        files['repositories'] = json.dumps({'test': {'legacy': cid}}).encode()
        return files, {}

    def docker_oci_files(self):
        """Docker 25+: an OCI layout, manifest.json naming blobs, legacy names as symlinks to the blobs."""
        self.blobs = list(self.raw)  # the moby image store keeps layers uncompressed
        self.comps = ['none'] * len(self.raw)
        self.__init__(self.raw, self.config['config'], self.comps)
        files = self.oci_files()
        links = {}
        names = []
        for raw in self.raw:
            d = sha(raw)[7:]
            names.append('blobs/sha256/' + d)
            links[d[:16] + '/layer.tar'] = '../blobs/sha256/' + d
        files['manifest.json'] = json.dumps([dict(Config='blobs/sha256/' + sha(self.config_bytes)[7:],
                                                  RepoTags=['test:oci'], Layers=names)]).encode()
        return files, links


def write_tree(files, links, out, as_tar):
    if as_tar:
        with tarfile.open(out, 'w', format=tarfile.PAX_FORMAT) as t:
            dirs = set()
            for name in sorted(files):
                parts = name.split('/')[:-1]
                for i in range(len(parts)):
                    d = '/'.join(parts[:i + 1])
                    if d not in dirs:
                        dirs.add(d)
                        h = tarfile.TarInfo(d)
                        h.type, h.mode, h.mtime = tarfile.DIRTYPE, 0o755, MTIME
                        t.addfile(h)
                h = tarfile.TarInfo(name)
                h.size, h.mode, h.mtime = len(files[name]), 0o644, MTIME
                t.addfile(h, io.BytesIO(files[name]))
            for name, target in links.items():
                h = tarfile.TarInfo(name)
                h.type, h.linkname, h.mtime = tarfile.SYMTYPE, target, MTIME
                t.addfile(h)
        return
    os.makedirs(out, exist_ok=True)
    for name, data in files.items():
        p = os.path.join(out, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(data)
    for name, target in links.items():
        p = os.path.join(out, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        os.symlink(target, p)


def three_layer(bb):
    base = busybox_entries(bb) + [
        dir_('etc/app'), file_('etc/app/keep', 'kept\n'), file_('etc/app/gone', 'whited out\n'),
        dir_('opt'), dir_('opt/data'), file_('opt/data/lower', 'lower layer\n'),
        dir_('opt/data/sub'), file_('opt/data/sub/deep', 'deep\n'),
        dir_('srv'), file_('srv/original', 'linked across layers\n', uid=1000, gid=1000),
        file_('usr/bin/ping-cap', '#!/bin/sh\necho cap\n', 0o755,
              pax={'SCHILY.xattr.security.capability': '\x01\x00\x00\x02\x00\x20\x00\x00' + '\x00' * 12}),
        file_('usr/bin/su-like', '#!/bin/sh\nid -u\n', 0o4755),
        file_('etc/note', 'x', pax={'SCHILY.xattr.user.origin': 'layer one'}),
    ]
    mid = [file_('etc/app/.wh.gone', ''), dir_('opt/data'), file_('opt/data/.wh..wh..opq', ''),
           file_('opt/data/upper', 'middle layer\n'), file_('srv/new-in-2', 'two\n')]
    top = [ti('srv/link', tarfile.LNKTYPE, link='srv/original'), dir_('work', uid=1000, gid=1000),
           file_('work/hello.txt', 'hello from the image\n', uid=1000, gid=1000),
           file_('etc/app/.wh.keep-not', ''), file_('usr/bin/greet', '#!/bin/sh\necho "greet: $*"\n', 0o755)]
    cfg = dict(Env=['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=hello from env', 'IMAGE_ONLY=1'],
               WorkingDir='/work', User='app', Entrypoint=['/usr/bin/greet'], Cmd=['from', 'cmd'],
               Labels={'org.example.test': 'three-layer'})
    return Image([base, mid, top], cfg, comps=['gzip', 'zstd', 'none'])


def noshell(bb):
    return Image([[dir_('etc'), file_('etc/only', 'no shell here\n')]], dict(Env=['A=1']))


def hostile(bb, what):
    base = busybox_entries(bb)
    cfg = dict(Env=['PATH=/usr/bin:/bin'])
    if what == 'abs':
        return Image([base, [file_('/tmp/abs-escape', 'inside the image only\n'),
                             file_('/etc/abs-file', 'absolute\n')]], cfg)
    if what == 'dotdot':
        return Image([base, [file_('../../../../tmp/space-dotdot-escape', 'escaped\n')]], cfg)
    if what == 'symlink-escape':
        return Image([base, [ti('up', tarfile.SYMTYPE, 0o777, link='/tmp/space-symlink-escape-target'),
                             ti('rel', tarfile.SYMTYPE, 0o777, link='../../../../../../tmp'),
                             file_('rel/space-symlink-escape-rel', 'through a relative symlink\n')],
                      [file_('up/planted', 'through a symlink\n')]], cfg)
    if what == 'device':
        return Image([base, [ti('dev-mem', tarfile.CHRTYPE, 0o666, dev=(1, 1)),
                             ti('dev-sda', tarfile.BLKTYPE, 0o666, dev=(8, 0)),
                             ti('fifo', tarfile.FIFOTYPE, 0o644)]], cfg)
    if what == 'setuid':
        return Image([base, [file_('usr/bin/id', open(bb, 'rb').read(), 0o4755),  # replaces the applet's symlink
                             file_('usr/bin/sgid', '#!/bin/sh\n', 0o2755, gid=0)]], cfg)
    if what == 'hardlink-escape':
        return Image([base, [ti('shadow', tarfile.LNKTYPE, link='../../../../etc/shadow')]], cfg)
    if what == 'hardlink-missing':
        return Image([base, [ti('ghost', tarfile.LNKTYPE, link='no/such/file')]], cfg)
    if what == 'platform':
        return Image([base], cfg, platform=('linux', 'arm64'))
    raise SystemExit('unknown hostile recipe ' + what)


def big(bb, size_mb):
    """Three layers of about size_mb MiB together: a base, a layer of many small files, one of large ones."""
    rnd = random.Random(17)
    total = size_mb << 20
    base = busybox_entries(bb)
    small = [dir_('usr/share'), dir_('usr/share/doc')]
    used = 0
    i = 0
    while used < total * 0.35:
        if i % 200 == 0:
            small.append(dir_('usr/share/doc/pkg%d' % (i // 200)))
        n = rnd.randint(200, 24000)
        small.append(file_('usr/share/doc/pkg%d/f%d.txt' % (i // 200, i), rnd.randbytes(n // 2).hex()[:n]))
        used += n
        i += 1
    large = [dir_('opt'), dir_('opt/blobs')]
    j = 0
    while used < total:
        n = min(rnd.randint(4 << 20, 24 << 20), total - used + 1)
        half = n // 2
        large.append(file_('opt/blobs/b%d.bin' % j, rnd.randbytes(half) + bytes(n - half)))
        used += n
        j += 1
    return Image([base, small, large], dict(Env=['PATH=/usr/bin:/bin'], Cmd=['/bin/sh']),
                 comps=['gzip', 'gzip', 'zstd'])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('recipe')
    ap.add_argument('out')
    ap.add_argument('--format', default='oci-dir', choices=['oci-dir', 'oci-tar', 'docker-legacy', 'docker-oci'])
    ap.add_argument('--busybox', default=shutil.which('busybox'))
    ap.add_argument('--size-mb', type=int, default=200)
    a = ap.parse_args()
    r = a.recipe
    if r == 'three-layer':
        img = three_layer(a.busybox)
    elif r == 'noshell':
        img = noshell(a.busybox)
    elif r == 'big':
        img = big(a.busybox, a.size_mb)
    elif r == 'hostile-digest':
        # Layer 2's bytes changed under its name: the manifest and the size still say the original.
        # An image of its own (no template shares its digest), its second layer plain: a flipped byte in a
        # file's data parses, and only the digest tells.
        img = hostile(a.busybox, 'setuid')
        img = Image(img.raw, img.config['config'], comps=['gzip', 'none'])
        files = img.oci_files()
        name = 'blobs/sha256/' + sha(img.blobs[1])[7:]
        b = bytearray(files[name])
        b[len(b) // 2] ^= 0xff
        files[name] = bytes(b)
        write_tree(files, {}, a.out, a.format == 'oci-tar')
        return
    elif r == 'hostile-index-multi':
        img = three_layer(a.busybox)
        m = dict(mediaType='application/vnd.oci.image.manifest.v1+json', digest=sha(img.manifest_bytes),
                 size=len(img.manifest_bytes), platform=dict(os='linux', architecture='amd64'))
        other = dict(m, platform=dict(os='linux', architecture='arm64', variant='v8'))
        att = dict(m, platform=dict(os='unknown', architecture='unknown'))
        files = img.oci_files(dict(schemaVersion=2, manifests=[other, att, m]))
        write_tree(files, {}, a.out, a.format == 'oci-tar')
        return
    elif r.startswith('hostile-'):
        img = hostile(a.busybox, r[len('hostile-'):])
    else:
        raise SystemExit('unknown recipe ' + r)
    if a.format.startswith('oci'):
        files, links = img.oci_files(), {}
    elif a.format == 'docker-legacy':
        files, links = img.docker_legacy_files()
    else:
        files, links = img.docker_oci_files()
    write_tree(files, links, a.out, a.format != 'oci-dir')
    print(sha(img.config_bytes))


if __name__ == '__main__':
    main()
