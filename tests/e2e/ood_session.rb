# Run on a lab portal as the cluster user, with Open OnDemand's job library (ood_core) loaded:
# what the dashboard does when a user launches an interactive app from its form. Prints one
# JSON object.
#   ruby ood_session.rb CLUSTERS_D APP_DIR WORK_DIR [FORM_FIELD=VALUE ...]
# 1. loads the dashboard's env file, as the dashboard does (what the apps' ERB reads from the
#    bundle: the cluster's name, the code that reads the session limits from Slurm), draws the
#    app's form (form.yml.erb) and takes each field's value from it unless given, as a browser
#    posts the form; renders the app's submit.yml.erb with those values (strings) and its
#    template/*.erb into WORK_DIR (the session folder under the user's home). A submit.yml.erb
#    that refuses the launch (it raises, the dashboard shows the message) ends here: printed as
#    {form, refused}, nothing submitted;
# 2. wraps template/script.sh in ood_core's batch_connect template of the app's submit.yml,
#    with the cluster's settings (set_host), and submits it with the app's sbatch options;
# 3. waits until the job has written connection.yml (after.sh, or the vnc template's
#    websockify, waits for the server's port), renders the app's view with the connection's
#    values where the app has one (the desktop has none: the dashboard draws its noVNC button),
#    and prints what the Connect button posts. The job keeps running: the caller ends it.
# A form's bc_queue is the partition, as the dashboard's auto_queues field submits it; the
# cluster's partitions (the adapter's queues, which that field lists) are printed too.
require "dotenv"
require "erb"
require "fileutils"
require "json"
require "yaml"
require "ood_core"

clusters_d, app_dir, work_dir, *fields = ARGV
ENV.update(Dotenv.parse("/etc/ood/config/apps/dashboard/env"))
given = fields.to_h { |field| field.split("=", 2) }
cluster = OodCore::Clusters.load_file(clusters_d).first

# The dashboard's binding: each form attribute is a method returning the submitted string.
class Scope
  def initialize(values) = @values = values
  def method_missing(name, *) = @values.fetch(name.to_s) { super }
  def respond_to_missing?(name, include_private = false) = @values.key?(name.to_s) || super
  def render(text) = ERB.new(text, trim_mode: "-").result(binding)
end

drawn = YAML.safe_load(Scope.new({}).render(File.read(File.join(app_dir, "form.yml.erb"))))
defaults = drawn.fetch("attributes").to_h { |name, attribute| [name, attribute["value"].to_s] }
form = defaults.slice(*drawn.fetch("form")).merge(given)
begin
  submit = YAML.safe_load(Scope.new(form).render(File.read(File.join(app_dir, "submit.yml.erb"))))
rescue ArgumentError => e
  puts({ form: drawn, refused: e.message }.to_json)
  exit
end
FileUtils.mkdir_p(work_dir)
Dir.glob(File.join(app_dir, "template", "*.erb")).each do |template|
  target = File.join(work_dir, File.basename(template, ".erb"))
  File.write(target, Scope.new(form).render(File.read(template)))
  File.chmod(File.stat(template).mode & 0o777, target)
end

batch_connect = submit.fetch("batch_connect").transform_keys(&:to_sym)
content = cluster.batch_connect_template(batch_connect.merge(work_dir: work_dir)).to_s
started = Time.now
job = cluster.job_adapter.submit(
  OodCore::Job::Script.new(
    content: content, workdir: work_dir, job_name: "ood-e2e-#{File.basename(app_dir)}",
    wall_time: form.fetch("bc_num_hours").to_i * 3600,
    output_path: File.join(work_dir, "output.log"), shell_path: "/bin/bash",
    queue_name: form["bc_queue"], native: submit.dig("script", "native")
  )
)
connection_file = File.join(work_dir, "connection.yml")
states = []
deadline = started + 300
until File.size?(connection_file) || Time.now > deadline
  state = cluster.job_adapter.info(job).status.to_sym
  states << state unless states.last == state
  break if state == :completed

  sleep 1
end
connection = File.size?(connection_file) ? YAML.safe_load(File.read(connection_file)) : nil
view_file = File.join(app_dir, "view.html.erb")
view = connection && File.exist?(view_file) &&
  Scope.new(connection.transform_values(&:to_s)).render(File.read(view_file))

puts({
  form: drawn, job: job, states: states, native: submit.dig("script", "native"),
  seconds_to_connection: connection && (Time.now - started).round(1),
  queues: cluster.job_adapter.queues.map(&:name),
  connection: connection, view: view
}.to_json)
