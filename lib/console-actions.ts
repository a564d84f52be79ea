// What each of the console's actions asks of the toolstack, as the permission it needs (the lower-cased XenAPI
// call or HTTP action, as xapi names permissions): the page disables what the user's role does not allow and
// says why; the console checks its own actions (uploads, conformance runs) against the same names; the
// toolstack judges everything else itself.
export const ACTION_PERMISSIONS = {
  "srs.create": "sr.create",
  "srs.probe": "sr.probe_ext",
  "srs.attach": "pbd.plug",
  "srs.detach": "pbd.unplug",
  "srs.destroy": "sr.destroy",
  "srs.forget": "sr.forget",
  "srs.setDefault": "pool.set_default_sr",
  "volumes.create": "vdi.create",
  "volumes.snapshot": "vdi.snapshot",
  "volumes.clone": "vdi.clone",
  "volumes.copy": "vdi.copy",
  "volumes.destroy": "vdi.destroy",
  "volumes.rename": "vdi.set_name_label",
  "volumes.resize": "vdi.resize",
  "volumes.revert": "vdi.hangar_revert",
  "volumes.setCbt": "vdi.enable_cbt",
  "volumes.setKey": "vdi.add_to_other_config",
  "volumes.dataCopy": "vdi.hangar_data_copy",
  "volumes.dataMirror": "vdi.hangar_data_mirror",
  "vms.rename": "vm.set_name_label",
  "vms.setDescription": "vm.set_name_description",
  "vms.destroy": "vm.hangar_destroy",
  "vms.import": "http/put_import",
  "vms.export": "http/get_export",
  "volumes.download": "http/get_export_raw_vdi",
  "tasks.cancel": "task.cancel",
  "tasks.destroy": "task.destroy",
  "conformance.run": "http/post_plugins/write",
  "users.manage": "subject.create",
  "users.directory": "pool.enable_external_auth",
  "audit.read": "http/get_audit_log",
} as const;

export type ConsoleAction = keyof typeof ACTION_PERMISSIONS;
