# Installed by the slurm-app bundle (roles/open_ondemand). What one interactive session may ask
# of the cluster, read from Slurm as the signed-in user each time the dashboard draws an app's
# form (form.yml.erb) or submits it (submit.yml.erb): a node that joins with more CPUs or a new
# GPU type is offered at once, without a deploy of the portal, and a request past a limit is
# refused before sbatch with the limit named.
#
# Three reads, none of which holds anything a user submits:
# - `sinfo -N`, a row per node and partition: the partition (`*` marks the default), its time
#   limit, the node's CPUs, memory (MiB) and generic resources (slurm.conf, gres.conf);
# - the default QoS of each of the user's associations (accounting), the QoS a session of
#   theirs runs under, and those QoS's limits: the longest job, the most GPUs and CPUs one
#   user's jobs may hold at once or one job may have. Without accounting there are none.
require "etc"
require "open3"

module SlurmAppSessionLimits
  # What the largest node of a partition has, and the partition's time limit (nil: none).
  # gpus: the most GPUs one node has, by type ("" for any type).
  Partition = Struct.new(:name, :default, :max_minutes, :cpus, :memory_mib, :gpus, keyword_init: true)
  # A QoS's limits on one job of a user (nil: none).
  Qos = Struct.new(:name, :max_minutes, :gpus, :cpus, keyword_init: true)
  Limits = Struct.new(:partitions, :qos, keyword_init: true)

  # Each field's name as the form labels it and a refusal names it.
  LABELS = {
    nodes: "Number of nodes", hours: "Hours", cpus: "CPUs per node",
    memory_mib: "Memory per node (MiB)", gpus: "GPUs per node", gpu_type: "GPU type"
  }.freeze

  SINFO = ["sinfo", "-h", "-N", "-o", "%P|%l|%c|%m|%G"].freeze
  QOS = ["sacctmgr", "-n", "-P", "show", "qos", "format=name,maxwall,maxtrespu,maxtres"].freeze
  GPU = /(?:\A|,)gpu(?::([^:(,]+))?:(\d+)/

  def self.associations_argv(user = Etc.getpwuid(Process.uid).name)
    ["sacctmgr", "-n", "-P", "show", "assoc", "where", "user=#{user}", "format=defaultqos"]
  end

  # What Slurm answers now; a read that fails counts as no limit (Slurm's own checks at submit
  # remain).
  def self.read
    names = answer(associations_argv).lines.map(&:strip).reject(&:empty?).uniq
    Limits.new(
      partitions: parse_partitions(answer(SINFO)),
      qos: names.empty? ? [] : parse_qos(answer(QOS)).select { |qos| names.include?(qos.name) }
    )
  end

  def self.answer(argv)
    output, status = Open3.capture2(*argv, err: File::NULL)
    status.success? ? output : ""
  rescue SystemCallError
    ""
  end

  def self.parse_partitions(text)
    text.each_line.with_object({}) do |line, found|
      name, limit, cpus, memory, gres = line.chomp.split("|", 5)
      next if gres.nil? || name.to_s.empty?

      default = name.end_with?("*")
      name = name.delete_suffix("*")
      partition = found[name] ||= Partition.new(
        name: name, default: default, max_minutes: minutes(limit), cpus: 0, memory_mib: 0, gpus: {}
      )
      partition.cpus = [partition.cpus, cpus.to_i].max
      partition.memory_mib = [partition.memory_mib, memory.to_i].max
      node_gpus = gres.scan(GPU).map { |type, count| [type.to_s, count.to_i] }
      node_gpus << ["", node_gpus.sum { |_, count| count }] unless node_gpus.empty?
      node_gpus.each do |type, count|
        partition.gpus[type] = [partition.gpus.fetch(type, 0), count].max
      end
    end
  end

  # sacctmgr's QoS rows: name|MaxWall|MaxTRESPU|MaxTRES, the TRES as "cpu=4,gres/gpu=1".
  def self.parse_qos(text)
    text.each_line.filter_map do |line|
      name, wall, per_user, per_job = line.chomp.split("|", 4)
      next if per_job.nil? || name.to_s.empty?

      held = ->(resource) { [tres(per_user, resource), tres(per_job, resource)].compact.min }
      Qos.new(name: name, max_minutes: minutes(wall), gpus: held.call("gres/gpu"), cpus: held.call("cpu"))
    end
  end

  def self.tres(text, resource)
    text.to_s.split(",").each do |pair|
      key, value = pair.split("=", 2)
      return value.to_i if key == resource && value.to_s.match?(/\A\d+\z/)
    end
    nil
  end

  # A time as Slurm prints one: "D-HH:MM:SS", "H:MM:SS", "M:SS"; nil for "infinite", an empty
  # field or anything else.
  def self.minutes(limit)
    match = /\A(?:(\d+)-)?(\d+(?::\d+){0,2})\z/.match(limit.to_s)
    return nil if match.nil?

    parts = match[2].split(":").map(&:to_i)
    hours, minutes = if match[1] then parts.fill(0, parts.size...3).first(2)
                     elsif parts.size == 3 then parts.first(2)
                     else [0, parts.first]
                     end
    (match[1].to_i * 24 + hours) * 60 + minutes
  end

  # The user's loosest QoS for one limit: [its value, its name], or nil where one of them sets
  # none (or the user has none): a session may run under any of them.
  def self.loosest(qos, limit)
    return nil if qos.empty? || qos.any? { |q| q[limit].nil? }

    chosen = qos.max_by { |q| q[limit] }
    [chosen[limit], chosen.name]
  end

  # What the form offers: the most a session could get anywhere.
  def self.most(limits)
    values = limits.partitions.values
    hours = values.all?(&:max_minutes) && !values.empty? ? values.map(&:max_minutes).max / 60 : nil
    qos_minutes = loosest(limits.qos, :max_minutes)&.first
    qos_hours = qos_minutes && qos_minutes / 60
    qos_gpus = loosest(limits.qos, :gpus)&.first
    qos_cpus = loosest(limits.qos, :cpus)&.first
    {
      hours: [hours, qos_hours].compact.min,
      cpus: [values.map(&:cpus).max || 0, qos_cpus].compact.min,
      memory_mib: values.map(&:memory_mib).max || 0,
      gpus: [values.map { |p| p.gpus.fetch("", 0) }.max || 0, qos_gpus].compact.min,
      gpu_types: values.flat_map { |p| p.gpus.keys }.reject(&:empty?).uniq.sort
    }
  end

  # Why the session the form describes cannot run, naming the field and the limit; nil when it
  # fits, or its partition is not known here (Slurm then decides). Values are the form's
  # strings, as a browser posts them.
  def self.refusal(limits, queue:, nodes:, hours:, cpus:, memory_mib:, gpu_type:, gpus:)
    counts = { nodes: nodes, hours: hours, cpus: cpus, memory_mib: memory_mib, gpus: gpus }
    counts.each do |field, value|
      next if value.to_s.match?(/\A\d+\z/)

      return "#{LABELS[field]}: #{value.to_s.inspect} is not a whole number"
    end
    type = gpu_type.to_s
    unless type.match?(/\A[\w.-]*\z/)
      return "#{LABELS[:gpu_type]}: #{type.inspect} is not a type Slurm names"
    end

    nodes, hours, cpus, memory_mib, gpus = counts.values.map(&:to_i)
    { nodes: nodes, hours: hours, cpus: cpus }.each do |field, value|
      return "#{LABELS[field]}: at least 1" if value < 1
    end
    qos_refusal(limits.qos, nodes: nodes, hours: hours, cpus: cpus, gpus: gpus) ||
      partition_refusal(limits.partitions, queue, hours, cpus, memory_mib, type, gpus)
  end

  def self.qos_refusal(qos, nodes:, hours:, cpus:, gpus:)
    max_minutes, name = loosest(qos, :max_minutes)
    if max_minutes && hours * 60 > max_minutes
      return "#{LABELS[:hours]}: #{hours} is over QoS #{name}'s time limit of #{max_minutes / 60} hours"
    end
    { gpus: gpus, cpus: cpus }.each do |field, per_node|
      most, name = loosest(qos, field)
      next unless most && per_node * nodes > most

      return "#{LABELS[field]}: #{per_node} on #{nodes} node#{nodes == 1 ? '' : 's'} is more " \
             "than QoS #{name} lets one user hold (#{most})"
    end
    nil
  end

  def self.partition_refusal(partitions, queue, hours, cpus, memory_mib, type, gpus)
    partition = partitions[queue.to_s] || (queue.to_s.empty? && partitions.values.find(&:default))
    return nil unless partition

    where = "partition #{partition.name}"
    if partition.max_minutes && hours * 60 > partition.max_minutes
      return "#{LABELS[:hours]}: #{hours} is over #{where}'s time limit of " \
             "#{partition.max_minutes / 60} hours"
    end
    if cpus > partition.cpus
      return "#{LABELS[:cpus]}: #{cpus} is more than any node of #{where} has (#{partition.cpus})"
    end
    if memory_mib > partition.memory_mib
      return "#{LABELS[:memory_mib]}: #{memory_mib} is more than any node of #{where} has " \
             "(#{partition.memory_mib})"
    end
    if gpus.positive? && !partition.gpus.key?(type)
      return "#{LABELS[:gpu_type]}: no node of #{where} has #{type.empty? ? 'GPUs' : "#{type} GPUs"}"
    end
    most = partition.gpus.fetch(type, 0)
    if gpus > most
      return "#{LABELS[:gpus]}: #{gpus} is more than any node of #{where} has " \
             "(#{most}#{type.empty? ? '' : " #{type}"})"
    end
    nil
  end
end
