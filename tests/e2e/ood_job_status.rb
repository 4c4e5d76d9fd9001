# Run on a lab portal as the cluster user, with Open OnDemand's own job library (ood_core)
# loaded: what the dashboard's Active Jobs tab and its session cards read of one job. Prints
# one JSON object.
#   ruby ood_job_status.rb CLUSTERS_D JOB_ID
# The job's status (a session card shows an ended session once it is `completed`), its
# partition and its GPUs as the adapter reads them (squeue's tres-per-node, and the count the
# Jobs tab shows), whether the user's own listing (the Jobs tab's `info_all` filtered by owner)
# holds it, and whether its listing of all jobs does. A job the user may not see reads as ended:
# ood_core's status of a job Slurm does not list.
require "etc"
require "json"
require "ood_core"

clusters_d, job = ARGV
adapter = OodCore::Clusters.load_file(clusters_d).first.job_adapter
info = adapter.info(job)
every_job = adapter.info_all(attrs: nil)
listed = every_job.select { |i| i.job_owner == Etc.getpwuid.name }.map(&:id)
puts({
  status: info.status.to_sym, queue: info.queue_name, gpus: info.gpus,
  gres: info.native && info.native[:gres],
  listed: listed.include?(job), in_all_jobs: every_job.map(&:id).include?(job)
}.to_json)
